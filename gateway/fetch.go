package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/internal/dataurl"
	"github.com/turngate/turngate/internal/netguard"
)

// fetchRootCAs, when set (by tests only), replaces the system roots that
// remote file fetches trust.
var fetchRootCAs *x509.CertPool

// maxFetchRedirects bounds the redirects of one remote file fetch.
const maxFetchRedirects = 5

// fetchFiles, when limits.attachments.fetchRemote is on, replaces the https
// url of each file part of m with a data: URL of the content fetched from
// it, so the part is then checked, stored and sent as an inline file.
// field is m's path in the request body; errors name the part. Parts that
// are not well-formed file parts with an https URL are left for filePart
// to refuse, and a message with too many files is not fetched at all.
// One request fetches at most maxCount files in all (400 past that), so a
// saveMessages body of many messages cannot multiply the gateway's work.
func (r *fileRules) fetchFiles(ctx context.Context, m *engine.UIMessage, field string) error {
	if !r.limits.Fetches() || m.Role != engine.RoleUser {
		return nil
	}
	n := 0
	for _, p := range m.Parts {
		if p.Type == engine.PartFile {
			n++
		}
	}
	if n > r.limits.MaxCount {
		return nil
	}
	for j := range m.Parts {
		if err := r.fetchPart(ctx, &m.Parts[j], fmt.Sprintf("%s.parts[%d]", field, j)); err != nil {
			return err
		}
	}
	return nil
}

// fetchPart, when limits.attachments.fetchRemote is on, replaces the https
// url of the file part p (at field in the request body) with a data: URL
// of the content fetched from it. A part that is not a well-formed file
// part with an https URL of an allowed type is left for filePart to
// refuse; past maxCount fetches in one request it is a 400.
func (r *fileRules) fetchPart(ctx context.Context, p *engine.UIPart, field string) error {
	if !r.limits.Fetches() {
		return nil
	}
	mt, params, err := mime.ParseMediaType(p.MediaType)
	if p.Type != engine.PartFile || dataurl.Is(p.URL) || checkRemoteURL(p.URL) != nil ||
		err != nil || len(params) > 0 || !config.MediaTypeAllowed(r.limits.AllowedMediaTypes, mt) {
		return nil
	}
	if r.fetched++; r.fetched > r.limits.MaxCount {
		ae := errorf(http.StatusBadRequest, CodeInvalidAttachment, "field %s: one request may have at most %d remote files fetched (limits.attachments.maxCount)",
			field, r.limits.MaxCount)
		ae.Pointer = jsonPointer(field)
		return ae
	}
	data, err := r.fetch(ctx, p.URL, mt, field)
	if err != nil {
		return err
	}
	p.URL = dataurl.Encode(mt, data)
	return nil
}

// fetch GETs url (https only, within fetchTimeout, over connections to
// public addresses unless fetchAllowPrivate) and returns its body, which
// must be a 200 of type mediaType and at most maxBytes long.
func (r *fileRules) fetch(ctx context.Context, url, mediaType, field string) ([]byte, error) {
	bad := func(status int, code, format string, args ...any) error {
		ae := errorf(status, code, "field %s: %s", field, fmt.Sprintf(format, args...))
		ae.Pointer = jsonPointer(field)
		return ae
	}
	invalid := func(format string, args ...any) error {
		return bad(http.StatusBadRequest, CodeInvalidAttachment, "fetching the url: "+format, args...)
	}
	ctx, cancel := context.WithTimeout(ctx, r.limits.FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, invalid("not a URL")
	}
	resp, err := r.fetchClient().Do(req)
	if err != nil {
		return nil, invalid("%s", fetchFailure(ctx, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, invalid("the server answered %d, not 200", resp.StatusCode)
	}
	got, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case err != nil:
		return nil, invalid("the server's Content-Type %q is not a media type", resp.Header.Get("Content-Type"))
	case got != mediaType:
		return nil, invalid("the server's Content-Type %q is not the part's mediaType %q", got, mediaType)
	}
	tooLarge := func() error {
		return bad(http.StatusRequestEntityTooLarge, CodeTooLarge,
			"the fetched file is more than the limit of %d bytes (limits.attachments.maxBytes)", r.limits.MaxBytes)
	}
	if resp.ContentLength > r.limits.MaxBytes {
		return nil, tooLarge()
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, r.limits.MaxBytes+1))
	switch {
	case err != nil:
		return nil, invalid("%s", fetchFailure(ctx, err))
	case int64(len(data)) > r.limits.MaxBytes:
		return nil, tooLarge()
	}
	return data, nil
}

// fetchFailure describes a failed fetch for the client without the
// gateway's internals.
func fetchFailure(ctx context.Context, err error) string {
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, netguard.ErrRefused):
		return "the host resolves to an address that is not public (loopback, private, link-local, multicast or another special-purpose range), which the gateway does not connect to (limits.attachments.fetchAllowPrivate)"
	case errors.Is(err, errFetchRedirect):
		return "redirected to a URL that is not https"
	case errors.Is(err, errFetchRedirects):
		return fmt.Sprintf("more than %d redirects", maxFetchRedirects)
	case ctx.Err() != nil:
		return "timed out (limits.attachments.fetchTimeout)"
	case errors.As(err, &dnsErr):
		return "the host name does not resolve"
	default:
		var tlsErr *tls.CertificateVerificationError
		if errors.As(err, &tlsErr) {
			return "the server's TLS certificate is not trusted"
		}
		return "the connection failed"
	}
}

var (
	errFetchRedirect  = errors.New("redirect to a non-https URL")
	errFetchRedirects = errors.New("too many redirects")
)

// fetchClient is an HTTP client for one fetch: no proxy, no keep-alive,
// https-only redirects, and (unless fetchAllowPrivate) a dial-time check
// of the resolved address (netguard.Control), so DNS rebinding cannot
// reach private hosts.
func (r *fileRules) fetchClient() *http.Client {
	dialer := &net.Dialer{Timeout: r.limits.FetchTimeout}
	if !r.limits.FetchesPrivate() {
		dialer.Control = netguard.Control
	}
	return &http.Client{
		Transport: &http.Transport{
			DialContext:         dialer.DialContext,
			TLSClientConfig:     &tls.Config{RootCAs: fetchRootCAs, MinVersion: tls.VersionTLS12},
			TLSHandshakeTimeout: r.limits.FetchTimeout,
			DisableKeepAlives:   true,
			ForceAttemptHTTP2:   true,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Scheme != "https" || checkRemoteURL(req.URL.String()) != nil {
				return errFetchRedirect
			}
			if len(via) > maxFetchRedirects {
				return errFetchRedirects
			}
			return nil
		},
	}
}
