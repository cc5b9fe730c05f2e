package gateway

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"unicode"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/internal/dataurl"
)

// CodeInvalidAttachment answers a file part the gateway does not accept
// (malformed, too many, a disallowed or unsupported media type); the
// body's pointer names the part.
const CodeInvalidAttachment = "invalid_attachment"

// maxFilenameBytes bounds a file part's filename.
const maxFilenameBytes = 1024

// fileRules is how one request to an agent checks user files: the limits, and
// the checker of the agent's model provider (nil: every type passes).
type fileRules struct {
	limits   config.Attachments
	provider engine.FileChecker
	fetched  int // remote files fetched for this request (fetch.go)
}

// fileRules returns ag's file rules.
func (s *Server) fileRules(ag *agent) *fileRules {
	return &fileRules{limits: ag.files, provider: s.engine.FileChecker(ag.model)}
}

// filePart checks one client file part and returns it as stored: type,
// mediaType, url, filename and providerMetadata exactly as sent. field is
// the part's path ("messages[0].parts[1]"); errors carry its JSON pointer.
func (r *fileRules) filePart(p engine.UIPart, field string) (engine.UIPart, error) {
	bad := func(status int, code, format string, args ...any) error {
		ae := errorf(status, code, "field %s: %s", field, fmt.Sprintf(format, args...))
		ae.Pointer = jsonPointer(field)
		return ae
	}
	invalid := func(format string, args ...any) error {
		return bad(http.StatusBadRequest, CodeInvalidAttachment, format, args...)
	}
	mt, params, err := mime.ParseMediaType(p.MediaType)
	switch {
	case p.MediaType == "":
		return engine.UIPart{}, invalid("a file part needs a mediaType")
	case err != nil || len(params) > 0 || !strings.Contains(mt, "/"):
		// ParseMediaType takes a bare "image", which "image/*" would allow.
		return engine.UIPart{}, invalid("mediaType %q is not a media type (type/subtype, no parameters)", p.MediaType)
	case !config.MediaTypeAllowed(r.limits.AllowedMediaTypes, mt):
		return engine.UIPart{}, invalid("files of type %q are not allowed (allowed: %s)", mt, strings.Join(r.limits.AllowedMediaTypes, ", "))
	case len(p.Filename) > maxFilenameBytes || strings.ContainsFunc(p.Filename, unicode.IsControl):
		return engine.UIPart{}, invalid("filename must be at most %d bytes without control characters", maxFilenameBytes)
	case len(p.ProviderMetadata) > 0 && !isJSONObject(p.ProviderMetadata):
		return engine.UIPart{}, invalid("providerMetadata must be an object")
	}
	remote := !dataurl.Is(p.URL)
	if remote {
		if err := checkRemoteURL(p.URL); err != nil {
			return engine.UIPart{}, invalid("%v", err)
		}
	} else {
		u, err := dataurl.Parse(p.URL)
		if err != nil {
			return engine.UIPart{}, invalid("malformed url: %v", err)
		}
		if u.MediaType != "" && u.MediaType != mt {
			return engine.UIPart{}, invalid("mediaType %q does not match the data: URL's %q", mt, u.MediaType)
		}
		if u.Size > r.limits.MaxBytes {
			return engine.UIPart{}, bad(http.StatusRequestEntityTooLarge, CodeTooLarge,
				"the file is %d bytes, more than the limit of %d (limits.attachments.maxBytes)", u.Size, r.limits.MaxBytes)
		}
	}
	if r.provider != nil {
		if err := r.provider.CheckFile(mt, remote); err != nil {
			return engine.UIPart{}, invalid("%v", err)
		}
	}
	return engine.UIPart{Type: engine.PartFile, MediaType: p.MediaType, URL: p.URL, Filename: p.Filename,
		ProviderMetadata: p.ProviderMetadata}, nil
}

// countFiles refuses a message with more files than the limit.
func (r *fileRules) countFiles(n int, field string) error {
	if n <= r.limits.MaxCount {
		return nil
	}
	ae := errorf(http.StatusBadRequest, CodeInvalidAttachment, "field %s: %d files is more than the limit of %d (limits.attachments.maxCount)",
		field, n, r.limits.MaxCount)
	ae.Pointer, ae.Param = jsonPointer(field), field
	return ae
}

// checkRemoteURL accepts absolute https URLs with a host and no
// credentials.
func checkRemoteURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case s == "":
		return fmt.Errorf("a file part needs a url (a data: URL or an https URL)")
	case err != nil:
		return fmt.Errorf("url is not a URL: %v", err)
	case u.Scheme != "https":
		return fmt.Errorf("url must be a data: URL or an https URL, not a %q URL", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("url has no host")
	case u.User != nil:
		return fmt.Errorf("url must not carry credentials")
	}
	return nil
}

func isJSONObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

// fieldIndex matches a field path's index steps ("[3]").
var fieldIndex = regexp.MustCompile(`\[(\d+)\]`)

// jsonPointer turns a field path ("messages[0].parts[1]") into the JSON
// pointer of the request body ("/messages/0/parts/1").
func jsonPointer(field string) string {
	return "/" + strings.ReplaceAll(fieldIndex.ReplaceAllString(field, ".$1"), ".", "/")
}
