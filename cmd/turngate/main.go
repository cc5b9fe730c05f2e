// Command turngate is an HTTP gateway that runs an LLM agent's turn loop
// under operator-editable rules. Subcommands: serve, check-config, check,
// test, eval, schema, replay, audit, killswitch, version.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// commands maps each subcommand to the function that runs it. Each returns
// the process exit code.
var commands = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) int{
	"serve":        runServe,
	"check-config": runCheckConfig,
	"version":      runVersion,
	"check":        runCheck,
	"test":         runTest,
	"eval":         runEval,
	"schema":       runSchema,
	"replay":       runReplay,
	"audit":        runAudit,
	"init":         runInit,
	"killswitch":   runKillSwitch,
}

const usage = `usage: turngate <command> [flags]

commands:
  serve          run the gateway (embedded defaults when no --config is given)
  check-config   check a config file as serve would at startup, without serving
  check          compile and type-check a rules directory
  test           run the rule tests (*_test.rego, *_test.yaml) of a rules directory
  eval           dry-run one hook decision against a rules directory
  schema         print the JSON Schema of a rule input (tool_call, tool_result, turn, step)
  replay         re-evaluate an audit log's recorded decisions against candidate rules
  audit          verify FILE...: check the audit log's hash chain (tamper evidence)
  killswitch     set, list or lift a running gateway's kill switches (admin API)
  init           write DIR: the embedded rules, a commented config and a README to start from
  version        print the version, commit and Go version
`

// run dispatches args to a subcommand and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "turngate: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	return cmd(ctx, args[1:], stdout, stderr)
}
