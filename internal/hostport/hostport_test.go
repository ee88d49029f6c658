package hostport

import "testing"

func TestCheck(t *testing.T) {
	for _, s := range []string{"127.0.0.1:7233", "localhost:0", "[::1]:65535", ":8080"} {
		if err := Check(s); err != nil {
			t.Errorf("Check(%q) = %v, want nil", s, err)
		}
	}
	for _, s := range []string{"", "127.0.0.1", "host:port", "host:65536", "host:-1", "a:b:c"} {
		if err := Check(s); err == nil {
			t.Errorf("Check(%q) = nil, want an error", s)
		}
	}
}
