package wire

import (
	"errors"
	"net/url"
	"strings"
)

// Endpoint joins an API's base URL and an endpoint path, keeping the base
// URL's query (e.g. ?api-version=… or ?key=…) after the joined path.
func Endpoint(base, path string) string {
	u, err := url.Parse(base)
	if err != nil || u.RawQuery == "" {
		return strings.TrimRight(base, "/") + path
	}
	u.Path = strings.TrimRight(u.Path, "/") + path
	u.RawPath = ""
	return u.String()
}

// RedactURL hides what a URL may carry as credentials: the password, as
// url.URL.Redacted does, and every query value (a provider's baseURL may
// hold ?key=…), which becomes "xxxxx" with its name kept.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{"xxxxx"}
		}
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// redactURLError hides the credentials of the URL inside a transport error,
// whose text would otherwise reach logs.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = RedactURL(ue.URL)
	}
	return err
}
