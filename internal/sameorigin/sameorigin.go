// Package sameorigin keeps the redirects of an HTTP client that carries
// configured secrets (an HTTP tool's or an MCP server's headers) on the
// origin it was configured for.
//
// Go's http.Client copies a request's headers onto every redirect, and on
// a 307 or 308 its body too; it drops only Authorization, Cookie and
// WWW-Authenticate, and only when the host changes. A tool endpoint that
// answers with a redirect to another host would receive an X-Api-Key and
// the tool's input. So a redirect is followed only when it stays on the
// origin of the first request (scheme, host and port, RFC 6454): the
// same server, with the same trust. A redirect anywhere else — another
// host, another port, https to http, http to https — is not followed, and
// the request fails with an error naming the refused origin.
package sameorigin

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// MaxRedirects bounds the same-origin redirects of one request (Go's
// http.Client default).
const MaxRedirects = 10

// ErrCrossOrigin is the error (wrapped) of a request whose redirect left
// its origin.
var ErrCrossOrigin = errors.New("redirect to another origin not followed")

// Of returns u's origin, "scheme://host:port", with the scheme and host in
// lower case and the default port of http or https spelt out, so that
// "https://Example.com" and "https://example.com:443" are one origin.
func Of(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return scheme + "://" + host + ":" + port
}

// CheckRedirect is an http.Client CheckRedirect that follows at most
// MaxRedirects redirects, each only to the origin of the first request.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if to, from := Of(req.URL), Of(via[0].URL); to != from {
		return fmt.Errorf("%w: %s redirected to %s", ErrCrossOrigin, from, to)
	}
	if len(via) >= MaxRedirects {
		return fmt.Errorf("stopped after %d redirects", MaxRedirects)
	}
	return nil
}

// Client returns a copy of c (nil: http.DefaultClient) whose redirects
// stay on their origin (CheckRedirect); c's own CheckRedirect, if any, is
// consulted after it.
func Client(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	out := *c
	prev := c.CheckRedirect
	out.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := CheckRedirect(req, via); err != nil || prev == nil {
			return err
		}
		return prev(req, via)
	}
	return &out
}
