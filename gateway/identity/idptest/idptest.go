// Package idptest is a local OpenID Connect identity provider for tests
// and examples: signing keys of each accepted algorithm, a JWKS served over
// HTTP whose keys can change (rotation), and tokens signed with them.
package idptest

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

// Signer is a private signing key with its key id.
type Signer struct {
	KID  string
	Alg  jwa.SignatureAlgorithm
	priv jwk.Key
	// Public is the key the JWKS publishes.
	Public jwk.Key
}

// NewSigner makes a key for alg (RS256, ES256 or EdDSA) named kid.
func NewSigner(kid string, alg jwa.SignatureAlgorithm) (*Signer, error) {
	var raw any
	var err error
	switch alg {
	case jwa.RS256():
		raw, err = rsa.GenerateKey(rand.Reader, 2048)
	case jwa.ES256():
		raw, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jwa.EdDSA():
		_, raw, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, fmt.Errorf("idptest: no key for %s", alg)
	}
	if err != nil {
		return nil, err
	}
	priv, err := jwk.Import(raw)
	if err != nil {
		return nil, err
	}
	if err := priv.Set(jwk.KeyIDKey, kid); err != nil {
		return nil, err
	}
	pub, err := priv.PublicKey()
	if err != nil {
		return nil, err
	}
	return &Signer{KID: kid, Alg: alg, priv: priv, Public: pub}, nil
}

// WithKID returns s signing under another kid (a forger's token naming a
// key it does not have, or a key of another type).
func (s *Signer) WithKID(kid string) (*Signer, error) {
	priv, err := s.priv.Clone()
	if err != nil {
		return nil, err
	}
	if err := priv.Set(jwk.KeyIDKey, kid); err != nil {
		return nil, err
	}
	return &Signer{KID: kid, Alg: s.Alg, priv: priv, Public: s.Public}, nil
}

// Sign returns a compact JWT of claims signed by s, its kid in the header.
func (s *Signer) Sign(claims map[string]any) (string, error) {
	tok := jwt.New()
	for k, v := range claims {
		if err := tok.Set(k, v); err != nil {
			return "", err
		}
	}
	b, err := jwt.Sign(tok, jwt.WithKey(s.Alg, s.priv))
	return string(b), err
}

// JWKS serves a key set; Add and Remove change it while it serves.
type JWKS struct {
	mu   sync.Mutex
	keys []jwk.Key
	// Fetches counts the requests served.
	Fetches atomic.Int32
}

// Add publishes the public keys of signers.
func (j *JWKS) Add(signers ...*Signer) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, s := range signers {
		j.keys = append(j.keys, s.Public)
	}
}

// ServeHTTP answers with the key set as JSON.
func (j *JWKS) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	j.Fetches.Add(1)
	set := jwk.NewSet()
	j.mu.Lock()
	for _, k := range j.keys {
		_ = set.AddKey(k)
	}
	j.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(set)
}
