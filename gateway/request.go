package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
)

// idPattern is what session, message and request ids may look like: the
// AI SDK's 16-character ids, UUIDs and prefixed ids all fit, path
// separators and whitespace do not.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_.:@-]{1,128}$`)

func validID(id string) bool { return idPattern.MatchString(id) && id != "." && id != ".." }

// readBody reads the (size-limited) request body and checks that it is
// UTF-8 JSON; it names what is wrong otherwise.
func readBody(c *gin.Context) ([]byte, error) {
	if ct := c.ContentType(); ct != "" && ct != "application/json" {
		return nil, errorf(http.StatusUnsupportedMediaType, CodeUnsupportedType, "content type must be application/json, not %q", ct)
	}
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
		return errBadRequest("field %s: expected %s, got JSON %s", field, te.Type, te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errorf(http.StatusBadRequest, CodeInvalidJSON, "malformed JSON: unexpected end of input")
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return errBadRequest("%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return err
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
			return errBadRequest("field %s: expected %s, got JSON %s", where, te.Type, te.Value)
		}
		return errBadRequest("field %s: %v", name, err)
	}
	return nil
}

// errField is a 400 about one field.
func errField(field, format string, args ...any) error {
	return errBadRequest("field %s: %s", field, fmt.Sprintf(format, args...))
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
	if ct := c.ContentType(); ct != "" && ct != "application/json" {
		return errorf(http.StatusUnsupportedMediaType, CodeUnsupportedType, "content type must be application/json, not %q", ct)
	}
	if !utf8.Valid(data) {
		return errorf(http.StatusBadRequest, CodeInvalidJSON, "request body is not valid UTF-8")
	}
	return decodeStrictJSON(data, v)
}
