package tests

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// deployDir is the deployment files' directory.
func deployDir() string { return filepath.Join(repoRoot, "deploy") }

// yamlDocs parses every document of the YAML file at p.
func yamlDocs(t *testing.T, p string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []map[string]any
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
	if len(docs) == 0 {
		t.Fatalf("%s holds no YAML document", p)
	}
	return docs
}

// dig walks m along keys (map keys, or list indexes as ints) and returns
// the value, failing the test when a step is missing.
func dig(t *testing.T, m any, keys ...any) any {
	t.Helper()
	v := m
	for i, k := range keys {
		switch k := k.(type) {
		case string:
			mm, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%v: not a mapping at %q", keys[:i], k)
			}
			if v, ok = mm[k]; !ok {
				t.Fatalf("%v: no key %q", keys[:i], k)
			}
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("%v: no item %d", keys[:i], k)
			}
			v = l[k]
		}
	}
	return v
}

// envRefs are the ${NAME} references of a config file.
var envRefs = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// deployConfig is what the deployment files must agree with: the gateway
// configuration they ship.
type deployConfig struct {
	raw             string
	port            string
	rulesDir        string
	env             []string
	shutdownTimeout time.Duration
}

func loadDeployConfig(t *testing.T) deployConfig {
	t.Helper()
	p := filepath.Join(deployDir(), "turngate.yaml")
	doc := yamlDocs(t, p)[0]
	data, _ := os.ReadFile(p)
	_, port, err := net.SplitHostPort(dig(t, doc, "listen").(string))
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	d, err := time.ParseDuration(dig(t, doc, "limits", "shutdownTimeout").(string))
	if err != nil {
		t.Fatalf("limits.shutdownTimeout: %v", err)
	}
	c := deployConfig{raw: string(data), port: port, rulesDir: dig(t, doc, "rules", "dir").(string), shutdownTimeout: d}
	for _, m := range envRefs.FindAllStringSubmatch(string(data), -1) {
		if !slices.Contains(c.env, m[1]) {
			c.env = append(c.env, m[1])
		}
	}
	if dig(t, doc, "store", "driver") != "postgres" {
		t.Error("the deployment's store is not PostgreSQL: replicas share one database")
	}
	return c
}

// TestDeployConfigServes starts the built gateway on deploy/turngate.yaml,
// laid out as the compose file and the Deployment mount it (the repo's
// rules next to it), on a fresh PostgreSQL schema: /healthz and /readyz
// answer 200 and a request without the API key is refused.
func TestDeployConfigServes(t *testing.T) {
	cfg := loadDeployConfig(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "turngate.yaml"), []byte(cfg.raw), 0o644); err != nil {
		t.Fatal(err)
	}
	copyDir(t, filepath.Join(repoRoot, "rules"), filepath.Join(dir, cfg.rulesDir))
	dsn, _, _ := pgSchema(t)
	sum := sha256.Sum256([]byte("deploy-test-key"))
	env := map[string]string{
		"TURNGATE_DATABASE_URL":   dsn,
		"TURNGATE_API_KEY_SHA256": hex.EncodeToString(sum[:]),
		"OPENAI_API_KEY":          "sk-deploy-test",
	}
	var envList []string
	for _, name := range cfg.env {
		v, ok := env[name]
		if !ok {
			t.Fatalf("deploy/turngate.yaml references ${%s}, which this test does not set", name)
		}
		envList = append(envList, name+"="+v)
	}

	check := exec.Command(binary, "check-config", "turngate.yaml")
	check.Dir, check.Env = dir, append(os.Environ(), envList...)
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("turngate check-config deploy/turngate.yaml: %v\n%s", err, out)
	}

	g := startGateway(t, gatewayOptions{Config: "turngate.yaml", Dir: dir, Env: envList})
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, err := g.getJSON(p, nil); err != nil || code != http.StatusOK {
			t.Errorf("GET %s = %d, %v; want 200 (the Deployment's probes use it)", p, code, err)
		}
	}
	if code, _, _ := g.try(http.MethodGet, "/v1/agents/assistant/sessions/s1/messages", nil); code != http.StatusUnauthorized {
		t.Errorf("a request without the API key answered %d, want 401", code)
	}
	if code, _, _ := g.as("deploy-test-key").try(http.MethodGet, "/v1/admin/rules", nil); code != http.StatusOK {
		t.Errorf("GET /v1/admin/rules with the API key answered %d, want 200", code)
	}
}

// TestDeployCompose checks deploy/compose.yaml against the configuration:
// PostgreSQL and two gateways, each running the config file it mounts with
// the rules next to it, every variable the config references set, the
// config's port published, and a stop grace period that covers the
// gateway's shutdownTimeout.
func TestDeployCompose(t *testing.T) {
	cfg := loadDeployConfig(t)
	doc := yamlDocs(t, filepath.Join(deployDir(), "compose.yaml"))[0]
	services := dig(t, doc, "services").(map[string]any)
	if _, ok := services["postgres"]; !ok {
		t.Fatal("compose.yaml has no postgres service")
	}
	var gateways []string
	for name, s := range services {
		svc := s.(map[string]any)
		if svc["command"] == nil {
			continue
		}
		gateways = append(gateways, name)
		t.Run(name, func(t *testing.T) {
			command := dig(t, svc, "command").([]any)
			i := slices.Index(command, any("--config"))
			if len(command) == 0 || command[0] != "serve" || i < 0 || i+1 >= len(command) {
				t.Fatalf("command %v is not serve --config FILE", command)
			}
			configPath := command[i+1].(string)
			mounts := map[string]string{}
			for _, v := range dig(t, svc, "volumes").([]any) {
				src, dst, _ := strings.Cut(strings.TrimSuffix(v.(string), ":ro"), ":")
				mounts[dst] = src
			}
			if mounts[configPath] != "./turngate.yaml" {
				t.Errorf("%s is mounted from %q, want ./turngate.yaml", configPath, mounts[configPath])
			}
			if want := path.Join(path.Dir(configPath), cfg.rulesDir); mounts[want] != "../rules" {
				t.Errorf("the rules directory %s is mounted from %q, want ../rules", want, mounts[want])
			}
			environment := dig(t, svc, "environment").(map[string]any)
			for _, name := range cfg.env {
				if _, ok := environment[name]; !ok {
					t.Errorf("the config references ${%s}, which the service does not set", name)
				}
			}
			if dsn, _ := environment["TURNGATE_DATABASE_URL"].(string); !strings.Contains(dsn, "@postgres:5432/") {
				t.Errorf("TURNGATE_DATABASE_URL %q does not name the postgres service", dsn)
			}
			published := false
			for _, p := range dig(t, svc, "ports").([]any) {
				published = published || strings.HasSuffix(p.(string), ":"+cfg.port)
			}
			if !published {
				t.Errorf("ports %v do not publish the config's port %s", svc["ports"], cfg.port)
			}
			grace, err := time.ParseDuration(dig(t, svc, "stop_grace_period").(string))
			if err != nil || grace <= cfg.shutdownTimeout {
				t.Errorf("stop_grace_period %v (%v) does not cover limits.shutdownTimeout %v", svc["stop_grace_period"], err, cfg.shutdownTimeout)
			}
		})
	}
	if len(gateways) != 2 {
		t.Errorf("compose.yaml runs gateways %v, want 2", gateways)
	}
}

// TestDeployKubernetes checks the manifests in deploy/kubernetes: the
// ConfigMap holds deploy/turngate.yaml; the Deployment runs it, mounts
// the rules ConfigMap as a directory (no subPath, so the "..data" swap
// reaches the watcher) where the config's rules.dir points, sets every
// variable the config references, exposes its port, probes /healthz and
// /readyz, and gives shutdown a grace period that covers
// limits.shutdownTimeout and the preStop pause; the Service and the
// PodDisruptionBudget select its pods.
func TestDeployKubernetes(t *testing.T) {
	cfg := loadDeployConfig(t)
	dir := filepath.Join(deployDir(), "kubernetes")
	kust := yamlDocs(t, filepath.Join(dir, "kustomization.yaml"))[0]
	objects := map[string]map[string]any{} // by kind
	for _, r := range dig(t, kust, "resources").([]any) {
		for _, doc := range yamlDocs(t, filepath.Join(dir, r.(string))) {
			kind := dig(t, doc, "kind").(string)
			if objects[kind] != nil {
				t.Fatalf("two %s objects", kind)
			}
			objects[kind] = doc
		}
	}
	for _, kind := range []string{"ConfigMap", "Deployment", "Service", "PodDisruptionBudget"} {
		if objects[kind] == nil {
			t.Fatalf("the kustomization has no %s", kind)
		}
	}
	cm, dep := objects["ConfigMap"], objects["Deployment"]
	if got := dig(t, cm, "data", "turngate.yaml").(string); got != cfg.raw {
		t.Error("the ConfigMap's turngate.yaml differs from deploy/turngate.yaml")
	}

	pod := dig(t, dep, "spec", "template", "spec").(map[string]any)
	labels := dig(t, dep, "spec", "template", "metadata", "labels")
	selector := dig(t, dep, "spec", "selector", "matchLabels")
	if fmt.Sprint(labels) != fmt.Sprint(selector) {
		t.Errorf("the Deployment's selector %v does not match its pods' labels %v", selector, labels)
	}
	if got := dig(t, objects["Service"], "spec", "selector"); fmt.Sprint(got) != fmt.Sprint(selector) {
		t.Errorf("the Service selects %v, want %v", got, selector)
	}
	if got := dig(t, objects["PodDisruptionBudget"], "spec", "selector", "matchLabels"); fmt.Sprint(got) != fmt.Sprint(selector) {
		t.Errorf("the PodDisruptionBudget selects %v, want %v", got, selector)
	}
	replicas := dig(t, dep, "spec", "replicas").(int)
	if minAvail := dig(t, objects["PodDisruptionBudget"], "spec", "minAvailable").(int); replicas < 2 || minAvail < 1 || minAvail >= replicas {
		t.Errorf("replicas %d, PodDisruptionBudget minAvailable %d: want at least 2 replicas and 1 ≤ minAvailable < replicas", replicas, minAvail)
	}

	c := dig(t, pod, "containers", 0).(map[string]any)
	args := dig(t, c, "args").([]any)
	i := slices.Index(args, any("--config"))
	if len(args) == 0 || args[0] != "serve" || i < 0 || i+1 >= len(args) {
		t.Fatalf("args %v are not serve --config FILE", args)
	}
	configPath := args[i+1].(string)

	portName := ""
	for _, p := range dig(t, c, "ports").([]any) {
		p := p.(map[string]any)
		if fmt.Sprint(p["containerPort"]) == cfg.port {
			portName, _ = p["name"].(string)
		}
	}
	if portName == "" {
		t.Fatalf("no named container port is the config's port %s", cfg.port)
	}
	if got := dig(t, objects["Service"], "spec", "ports", 0, "targetPort"); got != portName {
		t.Errorf("the Service targets port %v, want %s", got, portName)
	}
	for probe, want := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz"} {
		if got := dig(t, c, probe, "httpGet", "path"); got != want {
			t.Errorf("%s path %v, want %s", probe, got, want)
		}
		if got := dig(t, c, probe, "httpGet", "port"); got != portName {
			t.Errorf("%s port %v, want %s", probe, got, portName)
		}
	}

	var env []string
	for _, e := range dig(t, c, "env").([]any) {
		env = append(env, dig(t, e, "name").(string))
	}
	for _, name := range cfg.env {
		if !slices.Contains(env, name) {
			t.Errorf("the config references ${%s}, which the container does not set", name)
		}
	}

	volumes := map[string]string{} // volume name → ConfigMap name
	for _, v := range dig(t, pod, "volumes").([]any) {
		volumes[dig(t, v, "name").(string)] = dig(t, v, "configMap", "name").(string)
	}
	mounted := map[string]map[string]any{} // mount path → mount
	for _, m := range dig(t, c, "volumeMounts").([]any) {
		mounted[dig(t, m, "mountPath").(string)] = m.(map[string]any)
	}
	if m := mounted[configPath]; m == nil || volumes[m["name"].(string)] != dig(t, cm, "metadata", "name") || m["subPath"] != "turngate.yaml" {
		t.Errorf("%s is not mounted from the ConfigMap's turngate.yaml: %v", configPath, m)
	}
	rulesPath := path.Join(path.Dir(configPath), cfg.rulesDir)
	switch m := mounted[rulesPath]; {
	case m == nil:
		t.Errorf("nothing is mounted at the rules directory %s", rulesPath)
	case m["subPath"] != nil:
		t.Errorf("the rules are mounted with subPath, which the kubelet never updates: %v", m)
	case volumes[m["name"].(string)] == "":
		t.Errorf("the rules volume %v is not a ConfigMap", m["name"])
	}

	grace := time.Duration(dig(t, pod, "terminationGracePeriodSeconds").(int)) * time.Second
	pause := time.Duration(dig(t, c, "lifecycle", "preStop", "sleep", "seconds").(int)) * time.Second
	if grace < pause+cfg.shutdownTimeout+5*time.Second {
		t.Errorf("terminationGracePeriodSeconds %v does not cover the preStop pause %v, limits.shutdownTimeout %v and 5s to spare", grace, pause, cfg.shutdownTimeout)
	}
}
