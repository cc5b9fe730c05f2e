package policy

import (
	"fmt"
	"strings"
)

// Stable error codes. Tools and the admin API match on these, never on text.
const (
	CodeParse      = "parse_error"      // a file is not valid YAML, JSON or Rego
	CodeSchema     = "schema_error"     // a rule file has an unknown or missing key
	CodeType       = "type_error"       // an expression has the wrong type for its field
	CodeCompile    = "compile_error"    // an expression or module fails to compile
	CodeCost       = "cost_error"       // an expression exceeds its cost budget
	CodeSandbox    = "sandbox_error"    // a policy uses a builtin the sandbox forbids
	CodeEval       = "eval_error"       // evaluation failed at run time
	CodeConflict   = "conflict_error"   // a complete rule produced conflicting values
	CodeUndefined  = "undefined_error"  // the decision document was undefined
	CodeTimeout    = "timeout_error"    // evaluation exceeded its deadline
	CodeIO         = "io_error"         // a rule file could not be read
	CodeValidation = "validation_error" // a decision failed validation (e.g. a bad patch)
	CodeTestFailed = "test_failed"      // a test of the rules directory failed; the revision is rejected
	CodeNoTests    = "tests_missing"    // tests are required but the rules directory has none
	// CodeConflictWarning is a warning, not an error: two CEL rules visibly
	// set a last-wins field to different values under the same condition.
	CodeConflictWarning = "conflict_warning"
)

// Location is a position in a rule file. Line and Column are 1-based; zero
// means unknown.
type Location struct {
	File   string `json:"file"`
	Line   int    `json:"line,omitempty"`
	Column int    `json:"column,omitempty"`
}

// String renders the location as file, file:line or file:line:col,
// whichever parts are known.
func (l Location) String() string {
	switch {
	case l.Line == 0:
		return l.File
	case l.Column == 0:
		return fmt.Sprintf("%s:%d", l.File, l.Line)
	}
	return fmt.Sprintf("%s:%d:%d", l.File, l.Line, l.Column)
}

// Error is one positioned diagnostic.
type Error struct {
	Code     string   `json:"code"`
	Location Location `json:"location"`
	// Rule and Field name the CEL rule and the field being set, when known.
	// For CodeTestFailed, Rule is the failing test (a Rego test rule's
	// full name or a CEL test case's name).
	Rule    string `json:"rule,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
	// Snippet is the source line followed by a caret line under Column.
	Snippet string `json:"snippet,omitempty"`
}

// Error renders the diagnostic as "file:line:col: code: rule … field …:
// message", followed by the snippet on its own lines when there is one.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Location.File != "" {
		b.WriteString(e.Location.String())
		b.WriteString(": ")
	}
	b.WriteString(e.Code)
	if e.Rule != "" {
		fmt.Fprintf(&b, ": rule %q", e.Rule)
		if e.Field != "" {
			fmt.Fprintf(&b, " field %q", e.Field)
		}
	}
	b.WriteString(": ")
	b.WriteString(e.Message)
	if e.Snippet != "" {
		b.WriteString("\n")
		b.WriteString(e.Snippet)
	}
	return b.String()
}

// MaxErrors caps how many diagnostics one load reports, so a badly broken
// directory gives a readable report rather than thousands of lines.
const MaxErrors = 50

// Errors is every diagnostic of one load, in file then position order.
type Errors []*Error

// Error renders one diagnostic as itself, several as a count followed by
// one diagnostic per line.
func (es Errors) Error() string {
	if len(es) == 1 {
		return es[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d errors:", len(es))
	for _, e := range es {
		b.WriteString("\n")
		b.WriteString(e.Error())
	}
	return b.String()
}

// Snippet renders line (the source text of the error's line) with a caret
// under the 1-based column, the way cel-go and compilers do.
func Snippet(line string, column int) string {
	if column < 1 {
		return line
	}
	pad := make([]byte, 0, column)
	for i, r := range line {
		if i >= column-1 {
			break
		}
		if r == '\t' {
			pad = append(pad, '\t')
		} else {
			pad = append(pad, ' ')
		}
	}
	return line + "\n" + string(pad) + "^"
}

// File is one rule, data or test file: its path (as shown in diagnostics)
// and its contents.
type File struct {
	Path string
	Data []byte
}

// CodeUnknownToolWarning is a warning, not an error: a rule names a tool
// that the gateway config given to `turngate check --config` does not
// define, so the rule may never match (a typo, or a renamed tool).
const CodeUnknownToolWarning = "unknown_tool_warning"

// CodeIgnoredFileWarning is a warning, not an error: a file of the rules
// directory is not loaded because its extension is not a rule file's,
// though it nearly is (tools.rgo, turn.YAML): a typo there drops the
// file's rules without a word.
const CodeIgnoredFileWarning = "ignored_file_warning"

// ToolName is a tool name a rule spells out as a literal (compares the
// called tool's name with, or lists in activeTools), and where.
type ToolName struct {
	Name     string
	Location Location
	// Snippet is the source line with a caret under the name.
	Snippet string
}
