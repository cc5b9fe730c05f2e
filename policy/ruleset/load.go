package ruleset

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agnivade/levenshtein"

	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/celrules"
	"github.com/turngate/turngate/policy/opa"
	"github.com/turngate/turngate/policy/state"
)

// MaxFileBytes bounds one file of a rules directory. Rule and data files are
// small; the bound keeps a mistaken symlink to a log or a dump from eating the
// gateway's memory on every reload.
const MaxFileBytes = 4 << 20

// Kind is what a file of a rules directory holds, decided by its name alone.
type Kind string

// File kinds. Files of no kind are ignored (README.md, notes, editor files).
const (
	KindCEL      Kind = "cel"       // *.yaml, *.yml: beforeTurn / beforeStep rules
	KindCELTest  Kind = "cel-test"  // *_test.yaml, *_test.yml: CEL test cases
	KindRego     Kind = "rego"      // *.rego: tool_call / tool_result policies
	KindRegoTest Kind = "rego-test" // *_test.rego: OPA tests
	KindData     Kind = "data"      // *.json, data.yaml, *.data.yaml: Rego data
	KindState    Kind = "state"     // state.yaml, *.state.yaml: declared state (policy/state)
	KindIgnored  Kind = ""          // anything else
)

// Classify returns the kind of the file called name (a base name). Hidden
// files (including Kubernetes' "..data" entries), editor backup, lock and swap
// files are ignored, so are names with no rule extension.
func Classify(name string) Kind {
	if skipName(name) {
		return KindIgnored
	}
	switch ext := filepath.Ext(name); ext {
	case ".rego":
		if strings.HasSuffix(name, "_test.rego") {
			return KindRegoTest
		}
		return KindRego
	case ".json":
		return KindData
	case ".yaml", ".yml":
		stem := strings.TrimSuffix(name, ext)
		switch {
		case strings.HasSuffix(stem, "_test"):
			return KindCELTest
		case stem == "data" || strings.HasSuffix(stem, ".data"):
			return KindData
		case stem == "state" || strings.HasSuffix(stem, ".state"):
			return KindState
		}
		return KindCEL
	}
	return KindIgnored
}

// skipName reports whether name is a hidden file or an editor's backup, lock
// or swap file, none of which is ever part of a rule set.
func skipName(name string) bool {
	return strings.HasPrefix(name, ".") || // dotfiles, .#lock, .x.swp, ..data
		strings.HasSuffix(name, "~") || // emacs / vim backups
		strings.HasSuffix(name, ".swp") || strings.HasSuffix(name, ".swx") ||
		(strings.HasPrefix(name, "#") && strings.HasSuffix(name, "#")) // emacs autosave
}

// Reload results, as passed to Options.OnReload.
const (
	ReloadSuccess   = "success"   // a new revision was built and swapped in
	ReloadFailure   = "failure"   // the candidate was rejected; the last good one serves
	ReloadUnchanged = "unchanged" // the files hash to the live revision; nothing rebuilt
)

// Default watch timings.
const (
	// DefaultPollInterval is the backstop poll: it catches changes that
	// fsnotify misses (network filesystems, a watch lost with its directory).
	DefaultPollInterval = 5 * time.Second
	// DefaultDebounce coalesces an editor's or kubelet's burst of events
	// (write, rename, chmod, symlink swap) into one rebuild.
	DefaultDebounce = 100 * time.Millisecond
)

// Options configures loading, evaluation and reloading. The zero value is
// usable: default CEL and Rego options, time.Now, slog.Default, a 5s poll
// and a 100ms debounce.
type Options struct {
	// CEL and OPA are passed to the two compilers.
	CEL celrules.Options
	OPA opa.Options
	// Now supplies CEL's "now" variable; nil means time.Now.
	Now func() time.Time
	// Logger receives fail-open evaluation errors and reload results; nil
	// means slog.Default().
	Logger *slog.Logger
	// PollInterval is Watch's backstop poll; zero means
	// DefaultPollInterval, negative disables polling.
	PollInterval time.Duration
	// Debounce is how long Watch waits after a filesystem event before it
	// rebuilds, coalescing the events in between; zero means
	// DefaultDebounce.
	Debounce time.Duration
	// OnReload, if set, is called after every Manager reload attempt with
	// one of the Reload results and the error of a failure (a
	// policy.Errors; RejectReason classifies it). It is the hook for a
	// reloads-by-result metric.
	OnReload func(result string, err error)
	// Tests says whether the directory's tests gate the Manager's startup
	// and every reload; the zero value, TestsIfPresent, runs them when the
	// directory has any.
	Tests TestGate
}

// now reads the Now clock. Now stays nil for time.Now, which tells the
// hooks that their own start time is the clock's reading.
func (o Options) now() time.Time {
	if o.Now == nil {
		return time.Now()
	}
	return o.Now()
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.Debounce == 0 {
		o.Debounce = DefaultDebounce
	}
	return o
}

// FileInfo describes one file of a revision.
type FileInfo struct {
	Name   string `json:"name"`
	Kind   Kind   `json:"kind"`
	SHA256 string `json:"sha256"`
	Size   int    `json:"size"`
}

// Revision is one compiled rule set. It is immutable and safe for concurrent
// use; a turn uses one Revision for all its hooks.
type Revision struct {
	root     string // the directory, as diagnostics name it
	id       string
	loadedAt time.Time
	infos    []FileInfo
	byKind   map[Kind][]policy.File
	cel      *celrules.Set
	rego     *opa.Policy
	state    *state.Set
	opts     Options
	warnings policy.Errors
	// tests is what its tests gave when it was built.
	tests TestSummary
	// liveCov is measured once, the first time it is asked for; shared
	// by the revision's copies (withClock).
	liveCov *liveCoverage
}

// liveCoverage is a revision's coverage, measured on demand.
type liveCoverage struct {
	once sync.Once
	c    *Coverage
	errs policy.Errors
}

// ID returns the revision id, "sha256:<hex>" over the sorted names and
// contents of every loaded file (tests included).
func (r *Revision) ID() string { return r.id }

// LoadedAt returns when the revision was compiled.
func (r *Revision) LoadedAt() time.Time { return r.loadedAt }

// Files returns the revision's files in name order.
func (r *Revision) Files() []FileInfo { return slices.Clone(r.infos) }

// CEL returns the compiled CEL rules (beforeTurn, beforeStep).
func (r *Revision) CEL() *celrules.Set { return r.cel }

// Rego returns the compiled Rego policy (tool_call, tool_result).
func (r *Revision) Rego() *opa.Policy { return r.rego }

// State returns the revision's declared state (nil when it declares none).
func (r *Revision) State() *state.Set { return r.state }

// StateReads returns the declared states the rules of hook read, in name
// order: derived from the compiled rules' references to input.state.NAME
// (Rego) and state.NAME (CEL), never from a list kept by hand. None means
// the hook's events need no state read.
func (r *Revision) StateReads(hook string) []*state.Decl {
	return r.state.Named(r.stateReads(hook))
}

func (r *Revision) stateReads(hook string) []string {
	switch hook {
	case policy.HookBeforeTurn, policy.HookBeforeStep:
		return r.cel.StateReads(hook)
	case policy.HookBeforeToolCall:
		return r.rego.StateReads(opa.ToolCallPackage)
	case policy.HookToolResult:
		return r.rego.StateReads(opa.ToolResultPackage)
	}
	return nil
}

// Warnings returns the diagnostics that do not stop the revision from
// loading (conflicts visible in the CEL rules, celrules.Set.Warnings),
// with files named as in errors.
func (r *Revision) Warnings() policy.Errors { return r.warnings }

// ToolNames returns the tool names the rules spell out as literals, CEL's
// (celrules.Set.ToolNames), Rego's (opa.Policy.ToolNames) then the state
// declarations' tools (state.Set.ToolNames), with files named as in errors.
func (r *Revision) ToolNames() []policy.ToolName {
	names := append(append(r.cel.ToolNames(), r.rego.ToolNames()...), r.state.ToolNames()...)
	for i := range names {
		names[i].Location = locate(r.root, names[i].Location)
	}
	return names
}

// Load reads the rules directory dir and compiles it into a Revision. It
// reports every error of every file at once, in file and position order.
//
// Load does not descend into subdirectories: a folder beside the rules (a
// cookbook, fixtures) is never loaded by accident. Symlinks are followed
// inside the directory, so a Kubernetes ConfigMap mount, whose entries are
// links into "..data/", loads as plain files; a link out of it is an
// io_error and what it points to is never read (dirFS).
func Load(dir string, opts Options) (*Revision, policy.Errors) {
	return LoadFS(dirFS(dir), dir, opts)
}

// LoadFS is Load over a file system (an embedded rule set, for one).
// Diagnostics name files as root joined with the file name; rule ids in
// decision records ("turn.yaml#rule") use the bare file name, so they do not
// depend on where the directory is mounted.
func LoadFS(fsys fs.FS, root string, opts Options) (*Revision, policy.Errors) {
	snap, errs := readSnapshot(fsys, root)
	if errs != nil {
		return nil, errs
	}
	return compile(snap, opts.withDefaults())
}

// snapshot is the classified contents of a rules directory at one moment.
// Its files are named by their base names.
type snapshot struct {
	root   string
	id     string
	infos  []FileInfo
	byKind map[Kind][]policy.File
	// ignored warns of the entries left out that look like rule files
	// (ignoredWarning).
	ignored policy.Errors
}

// readSnapshot reads and classifies the files of fsys's top directory and
// hashes them.
func readSnapshot(fsys fs.FS, root string) (*snapshot, policy.Errors) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, policy.Errors{{
			Code:     policy.CodeIO,
			Location: policy.Location{File: root},
			Message:  fmt.Sprintf("reading rules directory: %v", unwrapPath(err)),
		}}
	}
	snap := &snapshot{root: root, byKind: map[Kind][]policy.File{}}
	var errs policy.Errors
	h := sha256.New()
	for _, e := range entries { // fs.ReadDir sorts by name
		name := e.Name()
		kind := Classify(name)
		if kind == KindIgnored {
			if w := ignoredWarning(fsys, e); w != "" {
				snap.ignored = append(snap.ignored, &policy.Error{Code: policy.CodeIgnoredFileWarning, Location: policy.Location{File: name}, Message: w})
			}
			continue
		}
		data, err := readFile(fsys, name)
		if errors.Is(err, errSkip) {
			continue
		}
		if err != nil {
			errs = append(errs, &policy.Error{
				Code:     policy.CodeIO,
				Location: policy.Location{File: filepath.Join(root, name)},
				Message:  fmt.Sprintf("reading rule file: %v", err),
			})
			continue
		}
		sum := sha256.Sum256(data)
		snap.infos = append(snap.infos, FileInfo{Name: name, Kind: kind, SHA256: hex.EncodeToString(sum[:]), Size: len(data)})
		snap.byKind[kind] = append(snap.byKind[kind], policy.File{Path: name, Data: data})
		// Length-prefixed name and contents: no two file sets hash alike.
		h.Write([]byte(strconv.Itoa(len(name)) + ":" + name + strconv.Itoa(len(data)) + ":"))
		h.Write(data)
	}
	if errs != nil {
		return nil, errs
	}
	snap.id = "sha256:" + hex.EncodeToString(h.Sum(nil))
	return snap, nil
}

// ignoredWarning says why the ignored entry e may be a mistake: a file
// whose name nearly has a rule extension (misnamedRuleFile), or a folder
// holding rule files, which are not loaded since only the directory's top
// level is read. It returns "" for anything else.
func ignoredWarning(fsys fs.FS, e fs.DirEntry) string {
	name := e.Name()
	if !e.IsDir() {
		if meant := misnamedRuleFile(name); meant != "" {
			return fmt.Sprintf("%s is not loaded: rule files end in .rego, .yaml, .yml or .json; did you mean %s?", name, meant)
		}
		return ""
	}
	if skipName(name) {
		return "" // ..data and the other hidden folders of a ConfigMap
	}
	entries, err := fs.ReadDir(fsys, name)
	if err != nil {
		return ""
	}
	for _, sub := range entries {
		if !sub.IsDir() && Classify(sub.Name()) != KindIgnored {
			return fmt.Sprintf("%s/ holds rule files (%s among them) that are not loaded: only the rules directory's top level is read; move them up beside the others", name, sub.Name())
		}
	}
	return ""
}

// ruleExtensions are the extensions Classify loads.
var ruleExtensions = []string{"rego", "yaml", "yml", "json"}

// misnamedRuleFile returns the rule file name that name nearly is — its
// extension a rule extension in another case (turn.YAML), or one with a
// letter left out or mistyped (tools.rgo, tools.reg, data.jsn) — or ""
// for a file that is plainly something else (README.md, notes.txt,
// audit.jsonl, pom.xml).
func misnamedRuleFile(name string) string {
	if skipName(name) {
		return ""
	}
	i := strings.LastIndex(name, ".")
	if i <= 0 {
		return ""
	}
	stem, ext := name[:i], strings.ToLower(name[i+1:])
	if ext == "xml" {
		return "" // a format of its own, one letter from yml
	}
	for _, want := range ruleExtensions {
		if ext == want || (len(ext) >= 3 && len(ext) <= len(want) && levenshtein.ComputeDistance(ext, want) == 1) {
			return stem + "." + want
		}
	}
	return ""
}

// errSkip marks a directory entry that is not a regular file (a folder, a
// link to one, a socket): it is not part of the rule set.
var errSkip = errors.New("not a regular file")

// readFile reads one entry, following symlinks, refusing files over
// MaxFileBytes.
func readFile(fsys fs.FS, name string) ([]byte, error) {
	fi, err := fs.Stat(fsys, name)
	if err != nil {
		return nil, unwrapPath(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, errSkip
	}
	if fi.Size() > MaxFileBytes {
		return nil, fmt.Errorf("file is %d bytes, over the %d byte limit", fi.Size(), MaxFileBytes)
	}
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, unwrapPath(err)
	}
	if len(data) > MaxFileBytes { // grew since Stat
		return nil, fmt.Errorf("file is over the %d byte limit", MaxFileBytes)
	}
	return data, nil
}

// unwrapPath drops the *fs.PathError wrapper, whose path repeats what the
// diagnostic's location already says.
func unwrapPath(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	return err
}

// compile builds a Revision from a snapshot, compiling CEL and Rego both so
// that one load reports the errors of both.
func compile(snap *snapshot, opts Options) (*Revision, policy.Errors) {
	st, stateErrs := state.Parse(snap.byKind[KindState])
	if st.Len() > 0 {
		opts.OPA.StateSchema = st.Schema()
		opts.CEL.StateNames = st.Names()
	}
	cel, celErrs := celrules.Compile(snap.byKind[KindCEL], opts.CEL)
	rego, regoErrs := opa.Compile(snap.byKind[KindRego], snap.byKind[KindData], opts.OPA)
	if errs := mergeErrors(stateErrs, celErrs, regoErrs); errs != nil {
		return nil, located(snap.root, errs)
	}
	return &Revision{
		liveCov:  &liveCoverage{},
		root:     snap.root,
		id:       snap.id,
		loadedAt: opts.now(),
		infos:    snap.infos,
		byKind:   snap.byKind,
		cel:      cel,
		rego:     rego,
		state:    st,
		opts:     opts,
		warnings: located(snap.root, append(cloneErrors(snap.ignored), cloneErrors(cel.Warnings())...)),
	}, nil
}

// located returns errs with each file named as root joined with its base
// name, for diagnostics that point at the real file.
func located(root string, errs policy.Errors) policy.Errors {
	for _, e := range errs {
		e.Location = locate(root, e.Location)
	}
	return errs
}

// cloneErrors copies diagnostics, so locating them leaves the originals be.
func cloneErrors(errs policy.Errors) policy.Errors {
	if errs == nil {
		return nil
	}
	out := make(policy.Errors, len(errs))
	for i, e := range errs {
		c := *e
		out[i] = &c
	}
	return out
}

// locate joins root to a location's file name.
func locate(root string, l policy.Location) policy.Location {
	if l.File != "" && root != "" {
		l.File = filepath.Join(root, l.File)
	}
	return l
}

// mergeErrors joins diagnostics into file then position order, capped at
// policy.MaxErrors. It returns nil when there are none.
func mergeErrors(lists ...policy.Errors) policy.Errors {
	var all policy.Errors
	for _, l := range lists {
		all = append(all, l...)
	}
	if len(all) == 0 {
		return nil
	}
	slices.SortStableFunc(all, func(a, b *policy.Error) int {
		if c := strings.Compare(a.Location.File, b.Location.File); c != 0 {
			return c
		}
		if a.Location.Line != b.Location.Line {
			return a.Location.Line - b.Location.Line
		}
		return a.Location.Column - b.Location.Column
	})
	if len(all) > policy.MaxErrors {
		all = all[:policy.MaxErrors]
	}
	return all
}

// LoadState reads only the state declarations of the rules directory dir
// (state.yaml, *.state.yaml), for tools that show what the rules may read
// (`turngate schema --rules`) even while a rule file is broken.
func LoadState(dir string) (*state.Set, policy.Errors) {
	snap, errs := readSnapshot(dirFS(dir), dir)
	if errs != nil {
		return nil, errs
	}
	st, errs := state.Parse(snap.byKind[KindState])
	return st, located(dir, errs)
}
