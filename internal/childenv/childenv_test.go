package childenv

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestEnv(t *testing.T) {
	t.Setenv("PATH", "/usr/bin")
	t.Setenv("TURNGATE_DATABASE_URL", "postgres://secret")
	t.Setenv("OPENAI_API_KEY", "sk-secret")
	got := Env(map[string]string{"MODE": "ro", "A_FIRST": "1", "PATH": "/opt/bin"})
	for _, want := range []string{"PATH=/usr/bin", "A_FIRST=1", "MODE=ro", "PATH=/opt/bin"} {
		if !slices.Contains(got, want) {
			t.Errorf("env %q lacks %s", got, want)
		}
	}
	for _, kv := range got {
		if kv == "TURNGATE_DATABASE_URL=postgres://secret" || kv == "OPENAI_API_KEY=sk-secret" {
			t.Errorf("env %q inherits %s", got, kv)
		}
	}
	if i, j := slices.Index(got, "PATH=/usr/bin"), slices.Index(got, "PATH=/opt/bin"); i > j {
		t.Errorf("env %q: the configured PATH must come last, so it wins", got)
	}
}

func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{"MODE": true, "_x1": true, "": false, "1X": false, "A=B": false, "A B": false, "Ä": false} {
		if err := CheckName(name); (err == nil) != ok {
			t.Errorf("CheckName(%q) = %v, want ok %v", name, err, ok)
		}
	}
}

// TestEnvOfABareGateway starts a child as the MCP stdio servers and exec
// extensions do, from a gateway whose environment has none of the
// inherited variables (env -i, a minimal container) and no configured
// env: the child must still see none of the gateway's secrets. An empty
// environment must not be a nil one, which os/exec reads as "inherit".
func TestEnvOfABareGateway(t *testing.T) {
	for _, k := range Inherited {
		t.Setenv(k, "") // restored after the test
		os.Unsetenv(k)
	}
	t.Setenv("OPENAI_API_KEY", "sk-secret")
	cmd := exec.Command("/usr/bin/env")
	cmd.Env = Env(nil)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("running /usr/bin/env: %v", err)
	}
	if strings.Contains(string(out), "sk-secret") {
		t.Errorf("the child inherited the gateway's environment:\n%s", out)
	}
}
