package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeConfig returns the yaml block of the "## Configuration" section of
// the repository's README.md.
func readmeConfig(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Configuration\n")
	if !ok {
		t.Fatal(`README.md has no "## Configuration" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```yaml\n")
	if !ok {
		t.Fatal("the Configuration section has no ```yaml block")
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatal("the Configuration section's yaml block is not closed")
	}
	return []byte(block)
}

// envRef matches the ${VAR} and ${VAR:-default} references of a config.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`)

// TestREADMEConfig keeps README's configuration reference true: its yaml
// block must parse and validate with the variables it references set.
func TestREADMEConfig(t *testing.T) {
	block := readmeConfig(t)
	vars := map[string]string{}
	for _, m := range envRef.FindAllStringSubmatch(string(block), -1) {
		vars[m[1]] = "value-of-" + m[1]
	}
	c, err := Parse("README.md", block, env(vars))
	if err != nil {
		t.Fatalf("README.md's configuration reference does not parse:\n%v", err)
	}
	if len(c.Agents) == 0 || len(c.Providers) == 0 {
		t.Errorf("README config has no agents or providers: %+v", c)
	}
}
