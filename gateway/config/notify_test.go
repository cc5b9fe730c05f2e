package config

import (
	"slices"
	"strings"
	"testing"
)

func webhookYAML(hook string) string {
	return "providers: [{name: p, type: scripted}]\nmodels: {m: {provider: p, model: x}}\nagents: [{name: a, model: m}]\n" +
		"approvalWebhooks:\n" + hook
}

func TestApprovalWebhookDefaults(t *testing.T) {
	c, err := Parse("test.yaml", []byte(webhookYAML("  - {url: \"https://approvals.example/hook\", secret: 0123456789abcdef}\n")), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	w := c.ApprovalWebhooks[0]
	if !slices.Equal(w.Events, ApprovalEvents) || w.Timeout != DefaultWebhookTimeout || w.AllowPrivate {
		t.Errorf("webhook %+v: want every event, the default timeout and no private addresses", w)
	}
}

// Every bad setting is an error at the value it is about; a typo cannot
// switch a webhook or its signature off.
func TestApprovalWebhookErrors(t *testing.T) {
	const ok = "url: \"https://x.example/\", secret: 0123456789abcdef"
	for _, tc := range []struct{ name, hook, want string }{
		{"relative url", "  - {url: /hook, secret: 0123456789abcdef}\n", "approvalWebhooks[0].url: must be an absolute http or https URL without credentials"},
		{"credentials in the url", "  - {url: \"https://u:p@x.example/\", secret: 0123456789abcdef}\n", "without credentials"},
		{"short secret", "  - {url: \"https://x.example/\", secret: short}\n", "approvalWebhooks[0].secret: every notification is signed"},
		{"unknown event", "  - {" + ok + ", events: [requested, approved]}\n", `approvalWebhooks[0].events: unknown event "approved" (want requested, decided or expired)`},
		{"event twice", "  - {" + ok + ", events: [expired, expired]}\n", "approvalWebhooks[0].events: expired is listed twice"},
		{"unknown tenant", "  - {" + ok + ", tenants: [defualt]}\n", `approvalWebhooks[0].tenants: "defualt" is not a configured tenant (one of an API key or of auth.jwt.tenants) (did you mean "default"?)`},
		{"unknown agent", "  - {" + ok + ", agents: [ghost]}\n", `approvalWebhooks[0].agents: unknown agent "ghost"`},
		{"misspelt key", "  - {" + ok + ", tenant: [acme]}\n", `unknown key "tenant" (did you mean "tenants"?)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("test.yaml", []byte(webhookYAML(tc.hook)), env(nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "test.yaml: line 5") {
				t.Errorf("error %v, want one at line 5 containing %q", err, tc.want)
			}
		})
	}
}
