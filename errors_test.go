package sluice_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// Every sentinel of package sluicetype is re-exported by the root
// package under its own name, as the same value.
func TestEverySentinelReexported(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	declared := func(files []string) map[string]string {
		out := map[string]string{}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range file.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok || gd.Tok != token.VAR {
					continue
				}
				for _, s := range gd.Specs {
					vs := s.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if strings.HasPrefix(n.Name, "Err") && i < len(vs.Values) {
							out[n.Name] = selector(vs.Values[i])
						}
					}
				}
			}
		}
		return out
	}
	glob := func(pattern string) []string {
		files, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	sentinels := declared(glob("sluicetype/*.go"))
	root := declared(glob("*.go"))
	if len(sentinels) < 10 {
		t.Fatalf("found only %d sentinels in sluicetype", len(sentinels))
	}
	for name := range sentinels {
		if root[name] != "sluicetype."+name {
			t.Errorf("the root package does not re-export sluicetype.%s as %s (it has %q)", name, name, root[name])
		}
	}
}

// selector renders a selector expression such as sluicetype.ErrX.
func selector(e ast.Expr) string {
	if sel, ok := e.(*ast.SelectorExpr); ok {
		if id, ok := sel.X.(*ast.Ident); ok {
			return id.Name + "." + sel.Sel.Name
		}
	}
	return ""
}
