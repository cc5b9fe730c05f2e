package console

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/httpguard"
	"github.com/turngate/turngate/gateway/identity"
)

// maxSignInBody bounds a sign-in request's body: a key is short.
const maxSignInBody = 4096

// signInRequest is the body of POST /console/api/session.
type signInRequest struct {
	Key string `json:"key"`
}

// sessionResponse describes the signed-in principal to the pages. The key
// never comes back, and the cookie is HttpOnly: the CSRF token is the only
// secret a page holds, in memory.
type sessionResponse struct {
	Tenant  string   `json:"tenant"`
	Subject string   `json:"subject"`
	Roles   []string `json:"roles"`
	// Admin says whether every view is open (the admin role); otherwise
	// only Approvals.
	Admin bool `json:"admin"`
	// CSRF is the token every request that changes something sends in
	// X-Turngate-CSRF ("" on a gateway without keys).
	CSRF string `json:"csrf"`
	// ExpiresAt is when the session ends (absent without keys).
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// Open says the gateway has no API keys: no sign-in, loopback only.
	Open bool `json:"open"`
}

func newSessionResponse(p engine.Principal, se *session) sessionResponse {
	r := sessionResponse{Tenant: p.Tenant, Subject: p.Subject, Roles: p.Roles, Admin: isAdmin(p)}
	if se != nil {
		r.CSRF, r.ExpiresAt = se.csrf, &se.expires
	}
	return r
}

// decodeSignIn parses a sign-in body strictly: one JSON object with a
// non-empty "key" and nothing else. It is the parser of the sign-in's
// untrusted input (fuzzed).
func decodeSignIn(data []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var req signInRequest
	if err := dec.Decode(&req); err != nil {
		return "", fmt.Errorf("the body must be a JSON object {\"key\": \"…\"}: %v", err)
	}
	if dec.More() {
		return "", errors.New("the body must be one JSON object {\"key\": \"…\"}")
	}
	key := strings.TrimSpace(req.Key)
	if key == "" {
		return "", errors.New("key is required: an API key with the admin role or an approver role")
	}
	return key, nil
}

// serveSession serves /console/api/session: GET describes the session,
// POST signs in with a key, DELETE signs out.
func (c *Console) serveSession(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if c.open() {
			resp := newSessionResponse(c.opts.Anonymous, nil)
			resp.Open = true
			writeJSON(w, http.StatusOK, resp)
			return
		}
		se, err := c.session(r)
		if err != nil {
			writeError(w, http.StatusUnauthorized, "unauthorized", err.Error())
			return
		}
		writeJSON(w, http.StatusOK, newSessionResponse(se.principal, se))
	case http.MethodPost:
		c.signInHandler(w, r)
	case http.MethodDelete:
		c.signOut(w, r)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST, DELETE")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "method "+r.Method+" is not allowed here")
	}
}

// signInHandler exchanges an API key or a JWT for a session cookie. The
// session ends after SessionTTL, or at the credential's expiry if sooner
// (the cookie says so too); a refused credential gets the bearer path's
// status and code.
func (c *Console) signInHandler(w http.ResponseWriter, r *http.Request) {
	if c.open() {
		writeError(w, http.StatusConflict, "conflict", "this gateway has no API keys (auth.apiKeys): it serves loopback only and the console needs no sign-in")
		return
	}
	if crossSite(r) {
		writeError(w, http.StatusForbidden, "forbidden", "a sign-in must come from the console's own page (Sec-Fetch-Site: cross-site)")
		return
	}
	source := httpguard.Source(r)
	for _, f := range []*httpguard.Failures{c.signIn, c.opts.Failures} {
		if wait, throttled := f.Throttled(source); throttled {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			writeError(w, http.StatusTooManyRequests, "too_many_requests", "too many failed sign-ins from this address; retry later")
			return
		}
	}
	if _, ok := httpguard.BodyType(r); !ok {
		writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "a sign-in is sent with Content-Type: "+httpguard.JSONType)
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSignInBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("a sign-in body is at most %d bytes", maxSignInBody))
		return
	}
	key, err := decodeSignIn(data)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	generation := c.generation.Load()
	cred, err := c.opts.Lookup(r.Context(), key)
	if err != nil {
		ref := (*Refusal)(nil)
		if !errors.As(err, &ref) {
			ref = &Refusal{Status: http.StatusUnauthorized, Code: "unauthorized", Message: "invalid API key"}
		}
		// An identity provider that cannot be reached is no guess.
		if ref.Status < http.StatusInternalServerError {
			c.failed(r, source, ref.Code+": "+ref.Message)
		}
		writeError(w, ref.Status, ref.Code, ref.Message)
		return
	}
	p := cred.Principal
	if len(p.Roles) == 0 {
		c.failed(r, source, "console sign-in with a key without roles")
		writeError(w, http.StatusForbidden, "forbidden", "this key has no role: the console takes a key with the admin role or a role approvals name (role:NAME)")
		return
	}
	id, se := c.sessions.create(cred, generation)
	maxAge := int(se.expires.Sub(c.opts.Now()) / time.Second)
	if maxAge <= 0 {
		// Within the clock skew past its exp: the session would end now.
		c.sessions.revoke(id)
		writeError(w, http.StatusUnauthorized, identity.CodeExpired, "the token expires now: sign in with a fresh one")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: id, Path: "/",
		Expires: se.expires, MaxAge: maxAge,
		HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteStrictMode,
	})
	c.opts.Logger.InfoContext(r.Context(), "console sign-in", "tenant", p.Tenant, "subject", p.Subject, "source", source, "expires", se.expires)
	writeJSON(w, http.StatusOK, newSessionResponse(p, se))
}

// failed records a failed sign-in in the console's throttle and the
// gateway's failure log.
func (c *Console) failed(r *http.Request, source, why string) {
	c.signIn.Fail(r.Context(), source, why, "console sign-in")
	c.opts.Failures.Fail(r.Context(), source, why, r.Method+" "+r.URL.Path)
}

// signOut revokes the session (with its CSRF token) and clears the cookie.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	se, err := c.session(r)
	switch {
	case errors.Is(err, ErrCSRF):
		writeError(w, http.StatusForbidden, "forbidden", err.Error())
		return
	case err != nil:
		writeError(w, http.StatusUnauthorized, "unauthorized", err.Error())
		return
	}
	ck, _ := r.Cookie(CookieName)
	c.sessions.revoke(ck.Value)
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteStrictMode})
	c.opts.Logger.InfoContext(r.Context(), "console sign-out", "tenant", se.principal.Tenant, "subject", se.principal.Subject)
	w.WriteHeader(http.StatusNoContent)
}

// secure reports whether the cookie must be Secure: the request came over
// TLS, to the gateway or to the proxy in front of it.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// tokenEqual compares a sent CSRF token with the session's in constant
// time; an empty one never matches.
func tokenEqual(sent, want string) bool {
	return sent != "" && subtle.ConstantTimeCompare([]byte(sent), []byte(want)) == 1
}

// writeJSON writes v as the JSON response.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", httpguard.JSONType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError writes the gateway's error shape {"code","message"}.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{code, msg})
}
