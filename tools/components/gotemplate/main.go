// gotemplate renders a k3s or RKE2 containerd config template the way those distributions do at every start: the
// admin's template (config.toml.tmpl, config-v3.toml.tmpl) is parsed with Go's text/template, the distribution's own
// config is defined beside it as the template "base", and the result is executed. The tests run gpuhook's block
// through it and hand the output to a real containerd.
//
//	gotemplate BASE TEMPLATE > config.toml
package main

import (
	"fmt"
	"os"
	"text/template"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: gotemplate BASE TEMPLATE")
		os.Exit(2)
	}
	base, err := os.ReadFile(os.Args[1])
	if err == nil {
		var own []byte
		if own, err = os.ReadFile(os.Args[2]); err == nil {
			err = render(string(base), string(own))
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gotemplate:", err)
		os.Exit(1)
	}
}

func render(base, own string) error {
	t, err := template.New("config").Option("missingkey=error").Parse(own)
	if err != nil {
		return err
	}
	if _, err = t.New("base").Parse(base); err != nil {
		return err
	}
	return t.Execute(os.Stdout, map[string]any{})
}
