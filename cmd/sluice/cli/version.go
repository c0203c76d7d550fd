package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// buildInfo is what sluice version prints.
type buildInfo struct {
	Version  string `json:"version"`
	Go       string `json:"go"`
	Commit   string `json:"commit,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
}

// readBuildInfo reads the binary's version: its module's version ("(devel)"
// when built from a checkout), and the commit and time the go command
// stamped from version control.
func readBuildInfo() buildInfo {
	b := buildInfo{Version: "(unknown)", Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.Version = info.Main.Version
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// version prints the binary's version.
func version(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print one JSON object")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sluice version [--json]\n\nPrints sluice's version, its Go version and the commit it was built from.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return ExitOK
		}
		return ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sluice version: unexpected arguments %q\n", fs.Args())
		return ExitUsage
	}
	b := readBuildInfo()
	if *asJSON {
		_ = json.NewEncoder(stdout).Encode(b)
		return ExitOK
	}
	fmt.Fprintf(stdout, "sluice %s (%s, %s/%s)", b.Version, b.Go, b.OS, b.Arch)
	if b.Commit != "" {
		fmt.Fprintf(stdout, " commit %s", b.Commit)
		if b.Modified {
			fmt.Fprint(stdout, " with local changes")
		}
		if b.Time != "" {
			fmt.Fprintf(stdout, " of %s", b.Time)
		}
	}
	fmt.Fprintln(stdout)
	return ExitOK
}
