package sameorigin

import (
	"errors"
	"net/http"
	"net/url"
	"testing"
)

func TestOf(t *testing.T) {
	for in, want := range map[string]string{
		"https://Example.COM/a?b":      "https://example.com:443",
		"https://example.com:443/":     "https://example.com:443",
		"http://example.com":           "http://example.com:80",
		"http://example.com:8080/x":    "http://example.com:8080",
		"https://[2001:DB8::1]:8443/x": "https://[2001:db8::1]:8443",
		"HTTPS://user:pw@example.com/": "https://example.com:443",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := Of(u); got != want {
			t.Errorf("Of(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestCheckRedirect(t *testing.T) {
	req := func(s string) *http.Request {
		r, err := http.NewRequest(http.MethodPost, s, http.NoBody)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := req("https://api.example.com/v1/tool")
	for to, cross := range map[string]bool{
		"https://api.example.com/v2/tool":     false,
		"https://API.example.com:443/x":       false,
		"https://other.example.com/v1/tool":   true,
		"http://api.example.com/v1/tool":      true,
		"https://api.example.com:8443/v1/tol": true,
		"https://169.254.169.254/latest":      true,
	} {
		err := CheckRedirect(req(to), []*http.Request{first})
		if got := errors.Is(err, ErrCrossOrigin); got != cross {
			t.Errorf("redirect to %s: %v, want cross-origin %v", to, err, cross)
		}
	}
	via := make([]*http.Request, MaxRedirects)
	for i := range via {
		via[i] = first
	}
	if err := CheckRedirect(req("https://api.example.com/again"), via); err == nil {
		t.Errorf("redirect %d followed", MaxRedirects+1)
	}
}

// TestClientKeepsItsOwnCheck: a client that follows no redirect at all
// stays that way.
func TestClientKeepsItsOwnCheck(t *testing.T) {
	c := Client(&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }})
	r, _ := http.NewRequest(http.MethodGet, "https://a.example/x", nil)
	if err := c.CheckRedirect(r, []*http.Request{r}); !errors.Is(err, http.ErrUseLastResponse) {
		t.Errorf("err = %v, want the client's own", err)
	}
}
