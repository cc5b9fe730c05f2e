package config

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
)

// Metrics configures GET /metrics, which names agents, tools, rules,
// extensions and models and shows their volumes. By default it is served
// on listen to anyone; Listen moves it to an address of its own, and a key
// makes it answer only a scraper that sends it.
type Metrics struct {
	// Listen, when set, serves /metrics on this address (host:port) and
	// no longer on listen: a port the scraper reaches and clients do not.
	Listen string `yaml:"listen"`
	// Key is the bearer key /metrics requires (Prometheus' bearer_token),
	// usually "${METRICS_KEY}"; like an API key it needs about 128 bits and
	// Parse keeps only its SHA-256. Set Key or KeySHA256, not both.
	Key       string `yaml:"key"`
	KeySHA256 string `yaml:"keySha256"`
}

// validate reports the metrics settings that cannot work.
func (m *Metrics) validate(listen string, add func(path, format string, args ...any)) {
	if m.Listen != "" {
		if _, _, err := net.SplitHostPort(m.Listen); err != nil {
			add("metrics.listen", "metrics.listen: %q is not host:port (e.g. 127.0.0.1:9090)", m.Listen)
		} else if m.Listen == listen {
			add("metrics.listen", "metrics.listen: %q is listen itself; leave metrics.listen unset to serve /metrics there", m.Listen)
		}
	}
	switch {
	case m.Key != "" && m.KeySHA256 != "":
		add("metrics", "metrics: set key or keySha256, not both")
	case m.Key != "":
		if why := weakKey(m.Key); why != "" {
			add("metrics.key", "metrics.key: %s", why)
		}
	case m.KeySHA256 != "" && !isSHA256Hex(m.KeySHA256):
		add("metrics.keySha256", "metrics.keySha256: must be 64 hex digits")
	}
}

// hashKey replaces a plaintext metrics key with its SHA-256.
func (m *Metrics) hashKey() {
	if m.Key != "" {
		sum := sha256.Sum256([]byte(m.Key))
		m.KeySHA256, m.Key = hex.EncodeToString(sum[:]), ""
	}
}
