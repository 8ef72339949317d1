package main

import (
	"os"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"
)

func promqlParseLabels(text string) (map[string]string, error) {
	lset, err := parser.ParseMetric(text)
	if err != nil {
		return nil, err
	}
	return lset.Map(), nil
}

// fileOrder gives each group its place in the rules file (groups are evaluated in that order,
// as promtool's unit tests do).
func fileOrder(path string) map[string]int {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var doc struct {
		Groups []struct {
			Name string `yaml:"name"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil
	}
	order := map[string]int{}
	for i, g := range doc.Groups {
		order[strings.TrimSpace(g.Name)] = i
	}
	return order
}
