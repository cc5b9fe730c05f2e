package extension

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SignatureHeader carries the http transport's signature of each request:
//
//	X-Turngate-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>
//
// where the HMAC is keyed with the extension's secret and computed over
// the timestamp, a dot and the raw request body ("<t>.<body>"). An
// extension recomputes it, compares in constant time and rejects a
// timestamp older than its tolerance (Verify does all three), so a
// captured request cannot be replayed later or altered.
const SignatureHeader = "X-Turngate-Signature"

// DefaultTolerance is how far a signature's timestamp may be from the
// verifier's clock: five minutes, as webhook senders commonly allow.
const DefaultTolerance = 5 * time.Minute

// Sign returns the SignatureHeader value for body sent at t.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Errors Verify returns.
var (
	ErrNoSignature  = errors.New("no valid " + SignatureHeader + " header")
	ErrBadSignature = errors.New("signature does not match the body")
	ErrStale        = errors.New("signature timestamp is outside the tolerance")
)

// Verify checks a SignatureHeader value against body and secret: the HMAC
// must match (compared in constant time) and the timestamp must be within
// tolerance of now. Extensions written in Go can call it; others follow
// the recipe of SignatureHeader.
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs [][]byte
	for _, kv := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if s, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, s)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrNoSignature
	}
	want := mac(secret, ts, body)
	ok := false
	for _, s := range sigs {
		ok = hmac.Equal(s, want) || ok
	}
	if !ok {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w (%s)", ErrStale, d.Round(time.Second))
	}
	return nil
}
