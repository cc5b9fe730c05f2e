package config

import (
	"fmt"
	"net/url"
	"slices"
	"time"
)

// Approval notification events (ApprovalWebhook.Events).
const (
	ApprovalEventRequested = "requested"
	ApprovalEventDecided   = "decided"
	ApprovalEventExpired   = "expired"
)

// ApprovalEvents are the events an approval webhook can subscribe to.
var ApprovalEvents = []string{ApprovalEventRequested, ApprovalEventDecided, ApprovalEventExpired}

// DefaultWebhookTimeout bounds one delivery attempt of an approval webhook.
const DefaultWebhookTimeout = 5 * time.Second

// ApprovalWebhook is a URL told when an approval of its agents or tenants
// is requested, decided or expired (gateway/notify): a signed JSON POST,
// retried with backoff.
type ApprovalWebhook struct {
	// URL receives the POSTs (http or https).
	URL string `yaml:"url"`
	// Secret keys the X-Turngate-Signature HMAC, as for extensions;
	// usually "${SOME_ENV_VAR}"; never logged.
	Secret string `yaml:"secret"`
	// Agents and Tenants, when set, limit the webhook to approvals of
	// these agents and of these tenants (both when both are set).
	Agents  []string `yaml:"agents"`
	Tenants []string `yaml:"tenants"`
	// Events are the events sent (default all: requested, decided,
	// expired).
	Events []string `yaml:"events"`
	// Timeout bounds each attempt (default 5s).
	Timeout time.Duration `yaml:"timeout"`
	// AllowPrivate lets the webhook reach loopback and private addresses;
	// without it such a URL is refused when dialled, as remote fetches are
	// (internal/netguard), so a config edit cannot point approvals at an
	// internal service by accident.
	AllowPrivate bool `yaml:"allowPrivate"`
}

// applyWebhookDefaults fills the webhooks' unset events and timeouts.
func (c *Config) applyWebhookDefaults() {
	for i := range c.ApprovalWebhooks {
		w := &c.ApprovalWebhooks[i]
		if len(w.Events) == 0 {
			w.Events = slices.Clone(ApprovalEvents)
		}
		if w.Timeout == 0 {
			w.Timeout = DefaultWebhookTimeout
		}
	}
}

// validateWebhooks reports, through add, every inconsistent approval
// webhook setting at its field path: a filter naming an agent or a tenant
// not configured is an error, not a webhook that silently never fires.
func (c *Config) validateWebhooks(add func(path, format string, args ...any)) {
	tenants := c.Tenants()
	for i, w := range c.ApprovalWebhooks {
		item := fmt.Sprintf("approvalWebhooks[%d]", i)
		if u, err := url.Parse(w.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			add(item+".url", "%s.url: must be an absolute http or https URL without credentials", item)
		}
		if len(w.Secret) < MinExtensionSecret {
			add(item+".secret", "%s.secret: every notification is signed; set a secret of at least %d characters (e.g. secret: ${APPROVAL_WEBHOOK_SECRET})", item, MinExtensionSecret)
		}
		for j, e := range w.Events {
			switch {
			case !slices.Contains(ApprovalEvents, e):
				add(fmt.Sprintf("%s.events[%d]", item, j), "%s.events: unknown event %q (want requested, decided or expired)", item, e)
			case slices.Contains(w.Events[:j], e):
				add(fmt.Sprintf("%s.events[%d]", item, j), "%s.events: %s is listed twice", item, e)
			}
		}
		if w.Timeout < 0 {
			add(item+".timeout", "%s.timeout: must be positive, not %s", item, w.Timeout)
		}
		for k, a := range w.Agents {
			if _, ok := c.Agent(a); !ok {
				add(fmt.Sprintf("%s.agents[%d]", item, k), "%s.agents: unknown agent %q", item, a)
			}
		}
		for k, t := range w.Tenants {
			if !slices.Contains(tenants, t) {
				add(fmt.Sprintf("%s.tenants[%d]", item, k), "%s.tenants: %q is not a configured tenant (one of an API key or of auth.jwt.tenants)%s",
					item, t, didYouMeanOf(t, tenants))
			}
		}
	}
}
