package config

import (
	"cmp"
	"fmt"
	"mime"
	"strings"
	"time"
)

// Attachments limits the file parts of user messages: limits.attachments
// for every agent, and an agent's attachments, whose set fields override
// the gateway's. Unless FetchRemote is on, the gateway never fetches a
// remote (https) file: its URL goes to providers that take URLs and is
// refused (400) for the others.
type Attachments struct {
	// MaxBytes bounds each inline file's decoded size (a data: URL's
	// payload). Over it: 413.
	MaxBytes int64 `yaml:"maxBytes"`
	// MaxCount bounds the files of one user message. Over it: 400.
	MaxCount int `yaml:"maxCount"`
	// AllowedMediaTypes, when set, are the media types accepted:
	// "image/png", or "image/*" for a whole type. Empty: any type the
	// agent's model provider can take.
	AllowedMediaTypes []string `yaml:"allowedMediaTypes"`
	// FetchRemote, when true, makes the gateway fetch each https file
	// at the door and keep it inline (a data: URL), checked as an inline
	// file. Default false: remote URLs are never fetched.
	FetchRemote *bool `yaml:"fetchRemote"`
	// FetchTimeout bounds one fetch (connect to last byte). Default 10s.
	FetchTimeout time.Duration `yaml:"fetchTimeout"`
	// FetchAllowPrivate lets fetches connect to addresses that are not
	// public: loopback, private, link-local, multicast and the other
	// special-purpose ranges (internal/netguard). Dangerous (SSRF into the
	// gateway's network): for tests and on-prem file servers only.
	FetchAllowPrivate *bool `yaml:"fetchAllowPrivate"`
}

// DefaultAttachmentFetchTimeout bounds one remote fetch by default.
const DefaultAttachmentFetchTimeout = 10 * time.Second

// Fetches reports whether remote files are fetched (fetchRemote).
func (a Attachments) Fetches() bool { return a.FetchRemote != nil && *a.FetchRemote }

// FetchesPrivate reports whether fetches may reach private addresses
// (fetchAllowPrivate).
func (a Attachments) FetchesPrivate() bool { return a.FetchAllowPrivate != nil && *a.FetchAllowPrivate }

// Defaults of limits.attachments.
const (
	// DefaultAttachmentMaxBytes fits a file base64-encoded (4/3 larger) in
	// the default limits.maxBodyBytes (4 MiB) with room for the message.
	DefaultAttachmentMaxBytes = 2 << 20
	DefaultAttachmentMaxCount = 4
)

// setDefaults fills the gateway-wide defaults. An unset maxBytes is
// DefaultAttachmentMaxBytes, lowered to the largest file that fits a
// request body of bodyBytes (limits.maxBodyBytes) when that is smaller, so
// a configuration written before attachments existed still loads.
func (a *Attachments) setDefaults(bodyBytes int64) {
	if a.MaxBytes == 0 {
		a.MaxBytes = min(DefaultAttachmentMaxBytes, (bodyBytes-roomBeside(bodyBytes))/4*3)
	}
	if a.MaxCount == 0 {
		a.MaxCount = DefaultAttachmentMaxCount
	}
	if a.FetchTimeout == 0 {
		a.FetchTimeout = DefaultAttachmentFetchTimeout
	}
}

// AttachmentLimits returns the limits of a's user files: the gateway's,
// with the fields a sets replacing them.
func (c *Config) AttachmentLimits(a *Agent) Attachments {
	l := c.Limits.Attachments
	if o := a.Attachments; o != nil {
		if o.MaxBytes != 0 {
			l.MaxBytes = o.MaxBytes
		}
		if o.MaxCount != 0 {
			l.MaxCount = o.MaxCount
		}
		if o.AllowedMediaTypes != nil {
			l.AllowedMediaTypes = o.AllowedMediaTypes
		}
		if o.FetchRemote != nil {
			l.FetchRemote = o.FetchRemote
		}
		if o.FetchTimeout != 0 {
			l.FetchTimeout = o.FetchTimeout
		}
		if o.FetchAllowPrivate != nil {
			l.FetchAllowPrivate = o.FetchAllowPrivate
		}
	}
	return l
}

// validate reports a's errors through add, each at its field under path
// (the field path of a) and its message prefixed with at. bodyBytes is limits.maxBodyBytes: a file of maxBytes,
// base64-encoded, must fit in a request body with room to spare, or
// no file of the allowed size could ever be sent. An agent's unset
// maxBytes (0) inherits the gateway's, checked on its own.
func (a *Attachments) validate(path, at string, bodyBytes int64, add func(path, format string, args ...any)) {
	if a == nil {
		return
	}
	bodyBytes = cmp.Or(bodyBytes, DefaultMaxBodyBytes)
	if room := roomBeside(bodyBytes); a.MaxBytes > 0 && bodyBytes < encodedSize(a.MaxBytes)+room {
		add(path+".maxBytes", "%s.maxBytes: a file of %d bytes is %d bytes in base64, more than limits.maxBodyBytes (%d) allows with %d bytes for the rest of the message; raise limits.maxBodyBytes to at least %d or lower maxBytes",
			at, a.MaxBytes, encodedSize(a.MaxBytes), bodyBytes, room, encodedSize(a.MaxBytes)+room)
	}
	if a.MaxBytes < 0 {
		add(path+".maxBytes", "%s.maxBytes: must not be negative, not %d", at, a.MaxBytes)
	}
	if a.MaxCount < 0 {
		add(path+".maxCount", "%s.maxCount: must not be negative, not %d", at, a.MaxCount)
	}
	if a.FetchTimeout < 0 {
		add(path+".fetchTimeout", "%s.fetchTimeout: must be positive, not %s", at, a.FetchTimeout)
	}
	for i, p := range a.AllowedMediaTypes {
		if err := checkMediaPattern(p); err != nil {
			add(fmt.Sprintf("%s.allowedMediaTypes[%d]", path, i), "%s.allowedMediaTypes[%d]: %v", at, i, err)
		}
	}
}

// bodyRoom is the request body room validate keeps beside one file of
// maxBytes for the rest of the request.
const bodyRoom = 64 << 10

// roomBeside is the room kept beside a file in a body of bodyBytes:
// bodyRoom, or half the body when that is smaller.
func roomBeside(bodyBytes int64) int64 { return min(bodyRoom, bodyBytes/2) }

// encodedSize is the length of n bytes in padded base64.
func encodedSize(n int64) int64 { return (n + 2) / 3 * 4 }

// checkMediaPattern accepts "type/subtype" and "type/*", lower-case.
func checkMediaPattern(p string) error {
	typ, sub, ok := strings.Cut(p, "/")
	if !ok || typ == "" || sub == "" || typ == "*" {
		return fmt.Errorf("%q is not a media type (type/subtype or type/*)", p)
	}
	if p != strings.ToLower(p) {
		return fmt.Errorf("%q must be lower-case", p)
	}
	if sub == "*" {
		sub = "x"
	}
	if mt, params, err := mime.ParseMediaType(typ + "/" + sub); err != nil || len(params) > 0 || mt != typ+"/"+sub {
		return fmt.Errorf("%q is not a media type (type/subtype or type/*)", p)
	}
	return nil
}

// MediaTypeAllowed reports whether mediaType (lower-case, without
// parameters) matches one of patterns; every type matches an empty list.
func MediaTypeAllowed(patterns []string, mediaType string) bool {
	if len(patterns) == 0 {
		return true
	}
	typ, _, _ := strings.Cut(mediaType, "/")
	for _, p := range patterns {
		if p == mediaType || p == typ+"/*" {
			return true
		}
	}
	return false
}
