package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/turngate/turngate/engine"
)

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
		if first, dup := seen[h]; dup {
			add(fmt.Sprintf("auth.apiKeys[%d].%s", i, field), "auth.apiKeys[%d]: the same key as auth.apiKeys[%d] (tenant %q): each key must map to one principal", i, first, c.Auth.APIKeys[first].Tenant)
			continue
		}
		seen[h] = i
	}
	l := c.Limits
	notNegative(add, "limits", mustNotBeNegative, map[string]any{"idleTimeout": l.IdleTimeout, "readBodyTimeout": l.ReadBodyTimeout, "maxConnections": l.MaxConnections})
}
