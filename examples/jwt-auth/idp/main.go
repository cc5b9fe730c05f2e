// Command idp is the jwt-auth example's identity provider: it makes an
// ES256 key, serves its JWKS at /jwks and writes tokens signed with it (and
// a forger's) into a folder, one file each, for check.sh and the tests.
package main

import (
	"flag"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"

	"github.com/turngate/turngate/gateway/identity/idptest"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve /jwks on")
	out := flag.String("out", "data", "folder to write the tokens into")
	issuer := flag.String("issuer", "https://idp.example.com/realms/acme", "the tokens' iss")
	flag.Parse()
	key, err := idptest.NewSigner("acme-2026", jwa.ES256())
	if err != nil {
		log.Fatal(err)
	}
	forger, err := idptest.NewSigner("acme-2026", jwa.ES256())
	if err != nil {
		log.Fatal(err)
	}
	now := time.Now()
	claims := func(changes map[string]any) map[string]any {
		c := map[string]any{"iss": *issuer, "aud": "turngate", "sub": "alice@acme", "org": "acme",
			"exp": now.Add(time.Hour).Unix(), "realm_access": map[string]any{"roles": []string{"user"}}}
		for k, v := range changes {
			c[k] = v
		}
		return c
	}
	tokens := map[string]struct {
		s *idptest.Signer
		c map[string]any
	}{
		"valid":        {key, claims(nil)},
		"expired":      {key, claims(map[string]any{"exp": now.Add(-time.Hour).Unix()})},
		"wrong-aud":    {key, claims(map[string]any{"aud": "another-app"})},
		"forged":       {forger, claims(map[string]any{"sub": "mallory", "realm_access": map[string]any{"roles": []string{"admin"}}})},
		"other-tenant": {key, claims(map[string]any{"org": "initech"})},
		"admin":        {key, claims(map[string]any{"sub": "ops@acme", "realm_access": map[string]any{"roles": []string{"admin"}}})},
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	for name, t := range tokens {
		tok, err := t.s.Sign(t.c)
		if err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(*out, name+".jwt"), []byte(tok), 0o600); err != nil {
			log.Fatal(err)
		}
	}
	jwks := &idptest.JWKS{}
	jwks.Add(key)
	mux := http.NewServeMux()
	mux.Handle("GET /jwks", jwks)
	log.Printf("idp serving /jwks on %s", *listen)
	log.Fatal(http.ListenAndServe(*listen, mux))
}
