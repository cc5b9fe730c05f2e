package gateway

import (
	"errors"
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
// provider and an upstream model as "provider/model". Every provider's
// error is reported, each positioned in the config file at the setting it
// is about (Config.ErrorAt), except a script's own errors, which name
// their line in the script.
func NewResolver(cfg *config.Config) (engine.ModelResolver, error) {
	providers := map[string]engine.Provider{}
	var errs []error
	for i, p := range cfg.Providers {
		at := func(field string, err error) error {
			return cfg.ErrorAt(fmt.Sprintf("providers[%d].%s", i, field), fmt.Errorf("providers[%d] (%s): %s: %w", i, p.Name, field, err))
		}
		prov, err := newProvider(p, at)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		providers[p.Name] = prov
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	aliases := map[string]registry.Alias{}
	for name, m := range cfg.Models {
		aliases[name] = registry.Alias{Provider: m.Provider, Model: m.Model}
	}
	r, err := registry.New(providers, aliases)
	if err != nil {
		// Validate has reported what the registry refuses; this is for a
		// Config changed since.
		return nil, cfg.ErrorAt("models", err)
	}
	return r, nil
}

// newProvider builds the provider p; at positions an error about one of
// its settings (by its key).
func newProvider(p config.Provider, at func(field string, err error) error) (engine.Provider, error) {
	switch p.Type {
	case config.ProviderScripted:
		opts := []scripted.Option{scripted.WithChunkDelay(p.ChunkDelay)}
		if p.Script == "" {
			return scripted.Default(opts...), nil
		}
		data, err := os.ReadFile(p.Script)
		if err != nil {
			return nil, at("script", err)
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
	return nil, at("type", fmt.Errorf("must be openai, anthropic or scripted, not %q", p.Type))
}
