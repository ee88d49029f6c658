package webui_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/cmd/worker/internal/webui"
	"github.com/tollgate/tollgate/internal/devserver"
)

// get fetches url and returns its status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// The UI serves its page and, through its HTTP API, the embedded server's
// namespaces.
func TestServesThePageAndTheNamespacesOfTheEmbeddedServer(t *testing.T) {
	dev, err := devserver.Start(devserver.Options{Namespace: "webui-test"})
	require.NoError(t, err)
	t.Cleanup(dev.Stop)

	ui, err := webui.Start(webui.Options{Address: "127.0.0.1:0", TemporalAddress: dev.Address(), Namespace: dev.Namespace()})
	require.NoError(t, err)
	t.Cleanup(ui.Stop)
	require.True(t, strings.HasPrefix(ui.URL(), "http://127.0.0.1:"), ui.URL())
	require.NotEqual(t, "http://127.0.0.1:0", ui.URL(), "port 0 is replaced by the port picked")

	status, page := get(t, ui.URL()+"/")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, strings.ToLower(page), "<!doctype html>")
	require.Contains(t, page, "_app/", "the page loads the UI's embedded assets")

	status, body := get(t, ui.URL()+"/api/v1/namespaces")
	require.Equal(t, http.StatusOK, status, body)
	var list struct {
		Namespaces []struct {
			NamespaceInfo struct {
				Name string `json:"name"`
			} `json:"namespaceInfo"`
		} `json:"namespaces"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &list), body)
	var names []string
	for _, n := range list.Namespaces {
		names = append(names, n.NamespaceInfo.Name)
	}
	require.Contains(t, names, "webui-test", "the UI reads the embedded server's namespaces: %s", body)

	status, settings := get(t, ui.URL()+"/api/v1/settings")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, settings, `"DefaultNamespace":"webui-test"`, "the UI opens on the server's namespace")
}

// A taken address is an error naming it, not the end of the process.
func TestATakenAddressIsAnError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	_, err = webui.Start(webui.Options{Address: l.Addr().String(), TemporalAddress: "127.0.0.1:7233"})
	require.ErrorContains(t, err, "webui: listen on "+l.Addr().String())
}
