package dataurl

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in        string
		mediaType string
		b64       bool
		size      int64
		text      string
		err       string
	}{
		{in: "data:image/png;base64,iVBORw0KGgo=", mediaType: "image/png", b64: true, size: 8, text: "\x89PNG\r\n\x1a\n"},
		{in: "DATA:Image/PNG;BASE64,AAAA", mediaType: "image/png", b64: true, size: 3, text: "\x00\x00\x00"},
		{in: "data:text/plain;charset=utf-8,hello%20world", mediaType: "text/plain", size: 11, text: "hello world"},
		{in: "data:,plain", size: 5, text: "plain"},
		{in: "data:;base64,aGk=", b64: true, size: 2, text: "hi"},
		{in: "data:;charset=utf-8,x", mediaType: "text/plain", size: 1, text: "x"},
		{in: "data:application/pdf;base64,", mediaType: "application/pdf", b64: true, size: 0},
		{in: "https://example.com/a.png", err: "not a data: URL"},
		{in: "data:image/png;base64", err: "no comma"},
		{in: "data:image/png;base64,abc", err: "not a multiple of 4"},
		{in: "data:image/png;base64,ab c", err: "invalid byte ' '"},
		{in: "data:image/png;base64,ab=c", err: "data after its padding"},
		{in: "data:image/png;base64,AB==", err: "non-zero padding bits"},
		{in: "data:image/png;base64,a===", err: "invalid byte '='"},
		{in: "data:image/png;base64,aGk=\n", err: "length 5"},
		{in: "data:text/plain,100%", err: "invalid percent escape"},
		{in: "data:text/plain,%zz", err: "invalid percent escape"},
		{in: "data:image/,x", err: "media type"},
		{in: "data:no slash;base64,AAAA", err: "media type"},
	} {
		u, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) = %v, want error containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if u.MediaType != tc.mediaType || u.Base64 != tc.b64 || u.Size != tc.size {
			t.Errorf("Parse(%q) = %+v, want mediaType %q base64 %v size %d", tc.in, u, tc.mediaType, tc.b64, tc.size)
		}
		if got := u.Text(); got != tc.text {
			t.Errorf("Parse(%q).Text() = %q, want %q", tc.in, got, tc.text)
		}
		if got, _ := base64.StdEncoding.DecodeString(u.Base64Data()); string(got) != tc.text {
			t.Errorf("Parse(%q).Base64Data() decodes to %q", tc.in, got)
		}
	}
}

func TestEncode(t *testing.T) {
	s := Encode("image/gif", []byte("GIF89a"))
	u, err := Parse(s)
	if err != nil || u.MediaType != "image/gif" || u.Size != 6 || u.Text() != "GIF89a" {
		t.Fatalf("Parse(Encode(…)) = %+v, %v", u, err)
	}
}

// FuzzParse checks Parse against the standard library: a payload Parse
// accepts decodes without error to exactly Size bytes, and a base64
// payload is accepted exactly when strict standard base64 accepts it.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"data:image/png;base64,iVBORw0KGgo=", "data:,a%20b", "data:;base64,", "data:text/plain;charset=x,%",
		"data:image/png;base64,AB==", "data:a/b;c=d;base64,YQ==", "data:application/pdf;base64,JVBERi0xLjQK",
		"DATA:Image/PNG;BASE64,AAAA", "Data:text/plain;Base64,aGk=", "dAtA:,a%20b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := Parse(s)
		if err != nil {
			return
		}
		if stored, err := ParseStored(s); err != nil || *stored != *u {
			t.Fatalf("ParseStored(%q) = %+v, %v; Parse gave %+v", s, stored, err, u)
		}
		b, err := u.Bytes()
		if err != nil {
			t.Fatalf("Parse(%q) accepted a payload Bytes rejects: %v", s, err)
		}
		if int64(len(b)) != u.Size {
			t.Fatalf("Parse(%q).Size = %d, decoded %d bytes", s, u.Size, len(b))
		}
		if u.Base64 {
			want, err := base64.StdEncoding.Strict().DecodeString(u.Data)
			if err != nil || !bytes.Equal(want, b) {
				t.Fatalf("Parse(%q) accepted base64 strict decoding rejects: %v", s, err)
			}
		} else if _, err := url.PathUnescape(u.Data); err != nil {
			t.Fatalf("Parse(%q) accepted a percent-encoding url.PathUnescape rejects: %v", s, err)
		}
		if u.MediaType != "" {
			again, err := Parse(Encode(u.MediaType, b))
			if err != nil || again.Size != u.Size || again.MediaType != u.MediaType {
				t.Fatalf("re-encoding %q: %+v, %v", s, again, err)
			}
		}
	})
}

// FuzzBase64Size checks the validator on raw payloads against strict
// standard base64.
func FuzzBase64Size(f *testing.F) {
	for _, s := range []string{"", "AAAA", "AB==", "AA==", "aGk=", "a===", "\r\nAAAA"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := base64Size(s)
		want, werr := base64.StdEncoding.Strict().DecodeString(s)
		if strings.ContainsAny(s, "\r\n") {
			werr = errNewline // the standard decoder skips newlines; data: URLs may not carry them
		}
		if (err == nil) != (werr == nil) {
			t.Fatalf("base64Size(%q) err %v, strict decoding err %v", s, err, werr)
		}
		if err == nil && n != int64(len(want)) {
			t.Fatalf("base64Size(%q) = %d, want %d", s, n, len(want))
		}
	})
}

var errNewline = errors.New("newline")

// BenchmarkParse reads a 2 MiB file (the default
// limits.attachments.maxBytes): validated, as the gateway admits it once,
// and stored, as each turn and step reads it back.
func BenchmarkParse(b *testing.B) {
	s := Encode("image/png", make([]byte, 2<<20))
	for _, bc := range []struct {
		name  string
		parse func(string) (*URL, error)
	}{{"validated", Parse}, {"stored", ParseStored}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				if _, err := bc.parse(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
