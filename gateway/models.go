package gateway

import (
	"fmt"
	"os"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/provider/anthropic"
	"github.com/turngate/turngate/engine/provider/openai"
	"github.com/turngate/turngate/engine/provider/registry"
	"github.com/turngate/turngate/engine/provider/scripted"
	"github.com/turngate/turngate/gateway/config"
)

// NewResolver builds the configured providers and returns the registry of
// cfg's model aliases. A model name that is not an alias may name a
// provider and an upstream model as "provider/model".
func NewResolver(cfg *config.Config) (engine.ModelResolver, error) {
	providers := map[string]engine.Provider{}
	for _, p := range cfg.Providers {
		prov, err := newProvider(p)
		if err != nil {
			return nil, fmt.Errorf("provider %s: %w", p.Name, err)
		}
		providers[p.Name] = prov
	}
	aliases := map[string]registry.Alias{}
	for name, m := range cfg.Models {
		aliases[name] = registry.Alias{Provider: m.Provider, Model: m.Model}
	}
	return registry.New(providers, aliases)
}

func newProvider(p config.Provider) (engine.Provider, error) {
	switch p.Type {
	case config.ProviderScripted:
		opts := []scripted.Option{scripted.WithChunkDelay(p.ChunkDelay)}
		if p.Script == "" {
			return scripted.Default(opts...), nil
		}
		data, err := os.ReadFile(p.Script)
		if err != nil {
			return nil, fmt.Errorf("reading script: %w", err)
		}
		script, err := scripted.Parse(p.Script, data)
		if err != nil {
			return nil, err
		}
		return scripted.New(script, opts...), nil
	case config.ProviderOpenAI:
		return openai.New(openai.Config{Name: p.Name, BaseURL: p.BaseURL, APIKey: p.APIKey, Headers: p.Headers}), nil
	case config.ProviderAnthropic:
		return anthropic.New(anthropic.Config{Name: p.Name, BaseURL: p.BaseURL, APIKey: p.APIKey, Headers: p.Headers}), nil
	}
	return nil, fmt.Errorf("unknown provider type %q", p.Type)
}
