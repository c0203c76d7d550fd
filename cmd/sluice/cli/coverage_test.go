package cli

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// ranOps records the operator commands the tests ran through where.run,
// by where they ran ("sqlite": on a database, "server": through one), so
// that TestMain can fail a full run that leaves a command untried.
var ranOps = struct {
	sync.Mutex
	on map[string]map[string]bool // op name -> where
}{on: map[string]map[string]bool{}}

// noteRan records the command args name (if they name one) as run at w.
func noteRan(w string, args []string) {
	for _, o := range operatorOps() {
		words := strings.Fields(o.name)
		if len(args) >= len(words) && slices.Equal(args[:len(words)], words) {
			ranOps.Lock()
			if ranOps.on[o.name] == nil {
				ranOps.on[o.name] = map[string]bool{}
			}
			ranOps.on[o.name][w] = true
			ranOps.Unlock()
			return
		}
	}
}

// serverOnly are the commands that work through a server alone.
var serverOnly = map[string]bool{"stream stats": true}

// untried lists the operator commands a full run of the tests did not
// run both on a database and through a server ("" when -run chose some
// tests, or when every command ran).
func untried() string {
	if f := flag.Lookup("test.run"); f == nil || f.Value.String() != "" {
		return ""
	}
	var missing []string
	for _, o := range operatorOps() {
		if o.noTarget {
			continue
		}
		for _, w := range []string{"sqlite", "server"} {
			if w == "sqlite" && serverOnly[o.name] {
				continue
			}
			if !ranOps.on[o.name][w] {
				missing = append(missing, fmt.Sprintf("%s (%s)", o.name, w))
			}
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return "operator commands no test ran through where.run: " + strings.Join(missing, ", ")
}
