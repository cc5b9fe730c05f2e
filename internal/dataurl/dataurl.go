// Package dataurl parses data: URLs (RFC 2397) as clients send file
// attachments: `data:[<mediatype>][;base64],<data>`. It is the parser of
// untrusted attachment input (fuzzed): it validates the whole payload and
// computes its decoded size without allocating a decoded copy.
package dataurl

import (
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"strings"
)

// URL is a parsed data: URL.
type URL struct {
	// MediaType is the declared media type, lower-cased, without
	// parameters; "" when the URL declares none (RFC 2397's default is
	// text/plain).
	MediaType string
	// Base64 reports the ";base64" encoding; otherwise Data is
	// percent-encoded.
	Base64 bool
	// Data is the payload after the comma, still encoded.
	Data string
	// Size is the decoded payload's length in bytes.
	Size int64
}

// Is reports whether s starts with the data: scheme (case-insensitive).
func Is(s string) bool { return len(s) >= 5 && strings.EqualFold(s[:5], "data:") }

// Parse parses and validates s. Base64 payloads must be standard base64
// with padding and no whitespace (what FileReader.readAsDataURL and
// Node's Buffer.toString("base64") write); other payloads must be valid
// percent-encoding.
func Parse(s string) (*URL, error) { return parse(s, true) }

// ParseStored parses s, a data: URL that Parse accepted before (a file
// part validated when its message was admitted, read back from the
// transcript): the header is parsed as Parse does, but the payload is not
// scanned byte by byte; its size comes from its length (and its percent
// escapes). The turn and the providers read stored files with it on every
// turn and step, where Parse would validate megabytes again each time.
func ParseStored(s string) (*URL, error) { return parse(s, false) }

// parse is Parse, validating the payload when validate is set.
func parse(s string, validate bool) (*URL, error) {
	if !Is(s) {
		return nil, errors.New("not a data: URL")
	}
	header, data, ok := strings.Cut(s[5:], ",")
	if !ok {
		return nil, errors.New("data: URL has no comma before its data")
	}
	u := &URL{Data: data}
	if h, found := cutSuffixFold(header, ";base64"); found {
		u.Base64, header = true, h
	}
	if header != "" {
		if strings.HasPrefix(header, ";") {
			header = "text/plain" + header // parameters only: RFC 2397's default type
		}
		mt, _, err := mime.ParseMediaType(header)
		if err != nil {
			return nil, fmt.Errorf("data: URL media type %q: %v", header, err)
		}
		u.MediaType = mt
	}
	var err error
	switch {
	case !validate && u.Base64:
		u.Size = int64(len(data)/4*3 - (len(data) - len(strings.TrimRight(data, "="))))
	case !validate:
		u.Size = int64(len(data) - 2*strings.Count(data, "%"))
	case u.Base64:
		u.Size, err = base64Size(data)
	default:
		u.Size, err = percentSize(data)
	}
	if err != nil {
		return nil, err
	}
	return u, nil
}

func cutSuffixFold(s, suffix string) (string, bool) {
	if len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix) {
		return s[:len(s)-len(suffix)], true
	}
	return s, false
}

// Bytes returns the decoded payload.
func (u *URL) Bytes() ([]byte, error) {
	if u.Base64 {
		return base64.StdEncoding.DecodeString(u.Data)
	}
	s, err := url.PathUnescape(u.Data)
	return []byte(s), err
}

// Base64Data returns the payload as standard base64 (the encoded data as
// sent when it already is, else the percent-decoded bytes encoded).
func (u *URL) Base64Data() string {
	if u.Base64 {
		return u.Data
	}
	b, _ := u.Bytes() // validated by Parse
	return base64.StdEncoding.EncodeToString(b)
}

// Text returns the decoded payload as a string.
func (u *URL) Text() string {
	b, _ := u.Bytes() // validated by Parse
	return string(b)
}

// Encode returns a base64 data: URL of data with media type mt.
func Encode(mt string, data []byte) string {
	return EncodeBase64(mt, base64.StdEncoding.EncodeToString(data))
}

// EncodeBase64 returns the data: URL with media type mt of b64, a payload
// already in standard base64 (URL.Base64Data), its scheme and ";base64"
// lower-case: the form model APIs document, whatever case the URL b64
// came from spelt them in.
func EncodeBase64(mt, b64 string) string {
	return "data:" + mt + ";base64," + b64
}

// base64Size validates standard padded base64 and returns its decoded
// length.
func base64Size(s string) (int64, error) {
	if len(s)%4 != 0 {
		return 0, fmt.Errorf("data: URL base64 payload has length %d, not a multiple of 4", len(s))
	}
	pad := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/':
			if pad > 0 {
				return 0, fmt.Errorf("data: URL base64 payload has data after its padding at offset %d", i)
			}
		case c == '=' && i >= len(s)-2:
			pad++
		default:
			return 0, fmt.Errorf("data: URL base64 payload has an invalid byte %q at offset %d", c, i)
		}
	}
	if pad > 0 && !zeroTail(s, pad) {
		return 0, errors.New("data: URL base64 payload has non-zero padding bits")
	}
	return int64(len(s)/4*3 - pad), nil
}

// zeroTail reports whether the bits the padding discards are zero, as
// encoding/base64's strict decoding requires.
func zeroTail(s string, pad int) bool {
	last := strings.IndexByte(alphabet, s[len(s)-pad-1])
	if pad == 2 {
		return last&0x0f == 0
	}
	return last&0x03 == 0
}

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// percentSize validates percent-encoding and returns the decoded length.
func percentSize(s string) (int64, error) {
	n := int64(0)
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return 0, fmt.Errorf("data: URL payload has an invalid percent escape at offset %d", i)
			}
			i += 2
		}
		n++
	}
	return n, nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
