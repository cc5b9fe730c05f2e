package mcptool

import (
	"net/http"
	"testing"
)

// recordingTransport answers every request with 204 and keeps the last.
type recordingTransport struct{ last *http.Request }

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r.last = req
	return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Request: req}, nil
}

// TestHeaderTransportOnlyToItsOrigin: the configured headers go to the
// server's origin only, whatever sends a request elsewhere through the
// client.
func TestHeaderTransportOnlyToItsOrigin(t *testing.T) {
	base := &recordingTransport{}
	s := &server{cfg: ServerConfig{URL: "https://MCP.example.com/mcp"}}
	tr := &headerTransport{base: base, headers: map[string]string{"Authorization": "Bearer s3cret"}, origin: s.origin()}
	for url, want := range map[string]string{
		"https://mcp.example.com:443/mcp": "Bearer s3cret",
		"https://mcp.example.com/other":   "Bearer s3cret",
		"https://evil.example.com/mcp":    "",
		"http://mcp.example.com/mcp":      "",
		"https://mcp.example.com:8443/":   "",
	} {
		req, err := http.NewRequest(http.MethodPost, url, http.NoBody)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
		if got := base.last.Header.Get("Authorization"); got != want {
			t.Errorf("%s: Authorization %q, want %q", url, got, want)
		}
	}
}
