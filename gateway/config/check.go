package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/turngate/turngate/engine"
)

// MinKeyBits is the least estimated strength of a plaintext API key (and
// of metrics.key): 128 bits, what 32 random hex digits or 22 random base64
// characters carry, beyond any online or offline guessing.
const MinKeyBits = 128

// minKeyDistinct is the fewest distinct characters a key may have: a
// random key of 128 bits has far more (32 hex digits have 8 distinct ones
// with a probability below 1e-9), a repeated or patterned one fewer.
const minKeyDistinct = 8

// keyBits estimates the strength of key as if it were random over the
// alphabet its characters suggest: 4 bits a character when all are hex
// digits, else log2 of the sizes of the classes it uses (lower case 26,
// upper case 26, digits 10, other printable 33). A key of fewer than
// minKeyDistinct distinct characters counts 0. The estimate flatters a
// chosen word ("correct-horse" is 13 characters of 59), so it refuses what
// is surely weak rather than proving a key strong; keySha256 keys are not
// estimated (their plaintext is not known).
func keyBits(key string) float64 {
	distinct := map[rune]bool{}
	var lower, upper, digit, other, hex bool
	hex = true
	for _, r := range key {
		distinct[r] = true
		switch {
		case r >= 'a' && r <= 'z':
			lower = true
		case r >= 'A' && r <= 'Z':
			upper = true
		case r >= '0' && r <= '9':
			digit = true
		default:
			other = true
		}
		if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
			hex = false
		}
	}
	if len(distinct) < minKeyDistinct {
		return 0
	}
	n := float64(utf8.RuneCountInString(key))
	if hex {
		return 4 * n
	}
	alphabet := 0
	for class, size := range map[*bool]int{&lower: 26, &upper: 26, &digit: 10, &other: 33} {
		if *class {
			alphabet += size
		}
	}
	return n * math.Log2(float64(alphabet))
}

// weakKey says why key is too weak to be an API key, or "" when it is not.
func weakKey(key string) string {
	bits := keyBits(key)
	if bits >= MinKeyBits {
		return ""
	}
	how := fmt.Sprintf("about %d bits", int(bits))
	if bits == 0 {
		how = fmt.Sprintf("fewer than %d distinct characters", minKeyDistinct)
	}
	return fmt.Sprintf("the key is too weak to resist guessing (%s; at least %d bits are needed): use 32 or more random hex digits (openssl rand -hex 32) or 22 random base64 characters, or set keySha256 to the SHA-256 of such a key", how, MinKeyBits)
}

// check reports, through add, what can be known wrong before the first
// turn: a provider of a vendor's own endpoint without an API key, a tool's
// input schema that does not compile, the same API key configured twice,
// and a negative connection limit. Validate calls it.
func (c *Config) check(add func(path, format string, args ...any)) {
	for i, p := range c.Providers {
		if (p.Type == ProviderOpenAI || p.Type == ProviderAnthropic) && p.APIKey == "" && p.BaseURL == "" {
			add(fmt.Sprintf("providers[%d].apiKey", i), "providers[%d] (%s): apiKey is empty: the %s API needs one (e.g. apiKey: ${%s_API_KEY}); set baseURL for a server that takes none",
				i, p.Name, p.Type, strings.ToUpper(p.Type))
		}
	}
	for i, t := range c.Tools {
		if t.InputSchema == nil {
			continue
		}
		raw, err := json.Marshal(t.InputSchema)
		if err == nil {
			err = engine.CheckSchema(raw)
		}
		if err != nil {
			add(schemaPath(fmt.Sprintf("tools[%d].inputSchema", i), err), "tools[%d] (%s): inputSchema: %v", i, t.Name, err)
		}
	}
	seen := map[string]int{}
	for i, k := range c.Auth.APIKeys {
		h, field := strings.ToLower(k.KeySHA256), "keySha256"
		if k.Key != "" {
			sum := sha256.Sum256([]byte(k.Key))
			h, field = hex.EncodeToString(sum[:]), "key"
		}
		if h == "" {
			continue
		}
		if k.Key != "" {
			if why := weakKey(k.Key); why != "" {
				add(fmt.Sprintf("auth.apiKeys[%d].key", i), "auth.apiKeys[%d].key: %s", i, why)
			}
		}
		if first, dup := seen[h]; dup {
			add(fmt.Sprintf("auth.apiKeys[%d].%s", i, field), "auth.apiKeys[%d]: the same key as auth.apiKeys[%d] (tenant %q): each key must map to one principal", i, first, c.Auth.APIKeys[first].Tenant)
			continue
		}
		seen[h] = i
	}
	l := c.Limits
	notNegative(add, "limits", mustNotBeNegative, map[string]any{"idleTimeout": l.IdleTimeout, "readBodyTimeout": l.ReadBodyTimeout, "maxConnections": l.MaxConnections})
}
