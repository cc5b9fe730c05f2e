package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/turngate/turngate/gateway/httpguard"
)

// idPattern is what session, message and request ids may look like: the
// AI SDK's 16-character ids, UUIDs and prefixed ids all fit, path
// separators and whitespace do not.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_.:@-]{1,128}$`)

func validID(id string) bool { return idPattern.MatchString(id) && id != "." && id != ".." }

// jsonBodies refuses a request body that is not declared JSON, whatever
// the route does with it (415): a form or text/plain POST, which a browser
// sends cross-site without asking, is never an API request.
func (s *Server) jsonBodies(c *gin.Context) {
	if !httpguard.HasBody(c.Request) {
		c.Next()
		return
	}
	if ct, ok := httpguard.BodyType(c.Request); !ok {
		msg := "a request body must be sent with Content-Type: " + httpguard.JSONType
		if ct != "" {
			msg += fmt.Sprintf(", not %q", ct)
		}
		s.writeError(c, errorf(http.StatusUnsupportedMediaType, CodeUnsupportedType, "%s", msg))
		c.Abort()
		return
	}
	c.Next()
}

// readBody reads the (size-limited) request body and checks that it is
// UTF-8 JSON; it names what is wrong otherwise (jsonBodies checked its
// content type).
func readBody(c *gin.Context) ([]byte, error) {
	data, err := io.ReadAll(c.Request.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.Header("Connection", "close")
			return nil, errorf(http.StatusRequestTimeout, CodeRequestTimeout, "the request body did not arrive within limits.readBodyTimeout")
		}
		return nil, errBadRequest("reading request body: %v", err)
	}
	if !utf8.Valid(data) {
		return nil, errorf(http.StatusBadRequest, CodeInvalidJSON, "request body is not valid UTF-8")
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errorf(http.StatusBadRequest, CodeInvalidJSON, "request body is empty")
	}
	return data, nil
}

// decodeStrictJSON decodes data into v; unknown fields are errors.
func decodeStrictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return errorf(http.StatusBadRequest, CodeInvalidJSON, "request body has data after the JSON value")
	}
	return nil
}

// jsonError turns a decoding error into a 400 that names the problem.
func jsonError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return errorf(http.StatusBadRequest, CodeInvalidJSON, "malformed JSON at byte %d: %v", se.Offset, err)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "(root)"
		}
		return errBadRequest("field %s: expected %s, got JSON %s", field, jsonTypeName(te.Type), te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errorf(http.StatusBadRequest, CodeInvalidJSON, "malformed JSON: unexpected end of input")
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return errBadRequest("%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return err
	}
	var pe *time.ParseError
	if errors.As(err, &pe) || strings.HasPrefix(err.Error(), "Time.UnmarshalJSON") {
		// time.Time's own errors quote Go's layout and method names.
		got := "a non-string"
		if pe != nil {
			got = strconv.Quote(pe.Value)
		}
		return errBadRequest("a time must be an RFC 3339 string such as \"2026-12-02T09:00:00Z\", not %s", got)
	}
	return errBadRequest("invalid JSON: %v", err)
}

// decodeField decodes one raw field, naming it in the error.
func decodeField(raw json.RawMessage, name string, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			where := name
			if te.Field != "" {
				where = name + "." + te.Field
			}
			return errBadRequest("field %s: expected %s, got JSON %s", where, jsonTypeName(te.Type), te.Value)
		}
		return errBadRequest("field %s: %v", name, err)
	}
	return nil
}

// jsonTypeName names the JSON a Go type decodes from, for a 400: a
// client reads JSON, and the gateway's Go types are none of its business.
func jsonTypeName(t reflect.Type) string {
	if t == nil {
		return "a JSON value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a JSON value"
}

// errField is a 400 about one field; field is its JSON path.
func errField(field, format string, args ...any) error {
	ae := errBadRequest("field %s: %s", field, fmt.Sprintf(format, args...))
	ae.Param = field
	return ae
}

// decodeOptionalBody decodes a JSON body into v when there is one; an
// empty body leaves v unchanged.
func decodeOptionalBody(c *gin.Context, v any) error {
	data, err := io.ReadAll(c.Request.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return errBadRequest("reading request body: %v", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if !utf8.Valid(data) {
		return errorf(http.StatusBadRequest, CodeInvalidJSON, "request body is not valid UTF-8")
	}
	return decodeStrictJSON(data, v)
}
