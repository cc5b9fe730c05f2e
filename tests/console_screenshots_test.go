package tests

import (
	"bytes"
	"fmt"
	"image"
	_ "image/png" // the screenshots are PNGs
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// consoleScreenshots names the screenshot in docs/console/ of each view of
// the console (the route names of the views in
// gateway/console/assets/app/app.js) and of its sign-in form. The browser
// tests take each of them (screenshot) on every run.
var consoleScreenshots = map[string]string{
	"sign-in":    "sign-in",
	"overview":   "overview",
	"decisions":  "decisions",
	"decision":   "decision",
	"turn":       "timeline",
	"playground": "playground",
	"replay":     "replay",
	"approvals":  "approvals",
}

// checkScreenshot returns why data is not a screenshot of a console page:
// a PNG (as a browser would sniff it) as wide as the browser's window
// (1280) and of a page's height.
func checkScreenshot(data []byte) error {
	if ct := http.DetectContentType(data); ct != "image/png" {
		return fmt.Errorf("content type %s, want image/png", ct)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("decoding: %w", err)
	}
	if format != "png" || cfg.Width != 1280 || cfg.Height < 300 || cfg.Height > 20000 {
		return fmt.Errorf("a %s of %d×%d, want a PNG 1280 wide, 300 to 20000 high", format, cfg.Width, cfg.Height)
	}
	return nil
}

// TestConsoleScreenshots: docs/console/ holds a screenshot of each of the
// console's views and of its sign-in, each a PNG of a sane size, and no
// other; the list is the views app.js routes.
func TestConsoleScreenshots(t *testing.T) {
	app, err := os.ReadFile(filepath.Join(repoRoot, "gateway", "console", "assets", "app", "app.js"))
	if err != nil {
		t.Fatal(err)
	}
	var views []string
	for _, m := range regexp.MustCompile(`(?m)^\s*\{ name: '([a-z-]+)'`).FindAllSubmatch(app, -1) {
		views = append(views, string(m[1]))
	}
	listed := slices.DeleteFunc(slices.Sorted(maps.Keys(consoleScreenshots)), func(v string) bool { return v == "sign-in" })
	if slices.Sort(views); len(views) == 0 || !slices.Equal(views, listed) {
		t.Errorf("app.js routes the views %v, consoleScreenshots lists %v", views, listed)
	}
	dir := filepath.Join(repoRoot, "docs", "console")
	for _, name := range consoleScreenshots {
		data, err := os.ReadFile(filepath.Join(dir, name+".png"))
		if err != nil {
			t.Errorf("%s.png: %v (TURNGATE_CONSOLE_SCREENSHOTS=1 go test ./tests -run TestConsoleInBrowser writes it)", name, err)
			continue
		}
		if err := checkScreenshot(data); err != nil {
			t.Errorf("%s.png: %v", name, err)
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Collect(maps.Values(consoleScreenshots))
	for _, f := range files {
		if name, ok := strings.CutSuffix(filepath.Base(f), ".png"); !ok || !slices.Contains(want, name) {
			t.Errorf("docs/console/%s is no view's screenshot", filepath.Base(f))
		}
	}
}
