package httpguard

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// request is a request that arrived on a listener at 127.0.0.1:8080.
func request(method, host string, headers ...string) *http.Request {
	r := httptest.NewRequest(method, "/v1/admin/rules/reload", nil)
	r.Host = host
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	return r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, addr))
}

func TestOpenModeRefusal(t *testing.T) {
	tests := []struct {
		name   string
		r      *http.Request
		refuse string // a word of the refusal; "" serves
	}{
		{"localhost", request("GET", "localhost:8080"), ""},
		{"LOCALHOST", request("GET", "LOCALHOST:8080"), ""},
		{"127.0.0.1", request("POST", "127.0.0.1:8080"), ""},
		{"127.1.2.3", request("GET", "127.1.2.3:8080"), ""},
		{"::1", request("GET", "[::1]:8080"), ""},
		{"a rebound name", request("GET", "evil.example:8080"), "loopback"},
		{"a name ending in localhost", request("GET", "evil.localhost.example:8080"), "loopback"},
		{"another port", request("GET", "localhost:9090"), "loopback"},
		{"no port (80)", request("GET", "localhost"), "loopback"},
		{"a private address", request("GET", "192.168.1.2:8080"), "loopback"},
		{"an empty Host", request("GET", ""), "loopback"},
		{"cross-site POST", request("POST", "localhost:8080", "Sec-Fetch-Site", "cross-site"), "cross-site"},
		{"same-site POST", request("POST", "localhost:8080", "Sec-Fetch-Site", "same-site", "Origin", "http://localhost:3000"), ""},
		{"cross-site GET", request("GET", "localhost:8080", "Sec-Fetch-Site", "cross-site"), ""},
		{"foreign Origin", request("POST", "localhost:8080", "Origin", "https://evil.example"), "Origin"},
		{"foreign Origin DELETE", request("DELETE", "localhost:8080", "Origin", "https://evil.example"), "Origin"},
		{"null Origin", request("POST", "localhost:8080", "Origin", "null"), "Origin"},
		{"loopback Origin", request("POST", "localhost:8080", "Origin", "http://127.0.0.1:5173"), ""},
		{"foreign Origin on GET", request("GET", "localhost:8080", "Origin", "https://evil.example"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := OpenModeRefusal(tc.r)
			if (got == "") != (tc.refuse == "") || !strings.Contains(got, tc.refuse) {
				t.Errorf("OpenModeRefusal = %q, want one naming %q", got, tc.refuse)
			}
		})
	}
}

func TestOpenModeRefusalWithoutLocalAddr(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	r.Host = "localhost:8080"
	if OpenModeRefusal(r) == "" {
		t.Error("a request whose listener is unknown was served")
	}
}

func TestBodyType(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json":                  true,
		"application/json; charset=utf-8":   true,
		"Application/JSON":                  true,
		"":                                  false,
		"text/plain":                        false,
		"application/x-www-form-urlencoded": false,
		"multipart/form-data; boundary=x":   false,
		"application/json;;":                false,
	} {
		r := httptest.NewRequest("POST", "/", strings.NewReader("{}"))
		r.Header.Set("Content-Type", ct)
		if _, ok := BodyType(r); ok != want {
			t.Errorf("BodyType(%q) = %v, want %v", ct, ok, want)
		}
	}
}

// FuzzOpenModeRefusal: whatever the Host, Origin and fetch metadata, a
// request is served only for a loopback name with the listener's port,
// and an unsafe one never with a cross-site marker or a foreign origin.
func FuzzOpenModeRefusal(f *testing.F) {
	for _, seed := range [][3]string{
		{"localhost:8080", "", ""}, {"127.0.0.1:8080", "http://localhost:3000", "same-site"},
		{"evil.example:8080", "http://evil.example", "cross-site"}, {"[::1]:8080", "null", ""},
		{"127.0.0.1.nip.io:8080", "", ""}, {"LOCALHOST:8080", "HTTP://127.0.0.1", "Cross-Site"},
		{"[::ffff:127.0.0.1]:8080", "", ""}, {"0x7f.1:8080", "", ""},
	} {
		f.Add(seed[0], seed[1], seed[2], true)
	}
	f.Fuzz(func(t *testing.T, host, origin, site string, post bool) {
		method := "GET"
		if post {
			method = "POST"
		}
		r := request(method, "x", "Origin", origin, "Sec-Fetch-Site", site)
		r.Host = host
		if OpenModeRefusal(r) != "" {
			return
		}
		name, port, err := net.SplitHostPort(host)
		if err != nil || port != "8080" {
			t.Fatalf("served Host %q", host)
		}
		if ip := net.ParseIP(name); !strings.EqualFold(name, "localhost") && (ip == nil || !ip.IsLoopback()) {
			t.Fatalf("served Host %q, not a loopback name", host)
		}
		if post && (strings.EqualFold(site, "cross-site") || (origin != "" && !loopbackOrigin(origin))) {
			t.Fatalf("served a POST with Origin %q, Sec-Fetch-Site %q", origin, site)
		}
	})
}
