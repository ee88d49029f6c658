// Package hostport checks listen and dial addresses given in configuration.
package hostport

import (
	"fmt"
	"net"
	"strconv"
)

// Check reports why s is not host:port with a port in [0, 65535], or nil.
func Check(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number in [0, 65535]", port)
	}
	return nil
}
