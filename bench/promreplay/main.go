// Command promreplay evaluates Prometheus rule files over synthetic counter streams with
// Prometheus's own rule engine (the rules and promql packages of the Prometheus release that
// `make test` installs, v2.42: the code path of `promtool test rules`), minute by minute, and
// prints every alert that starts or stops firing. bench/alerts.py drives it.
//
//	promreplay -spec spec.json -rules a.yml [-rules b.yml ...] > transitions.jsonl
//
// The spec lists the streams (Poisson arrivals, binomial outcomes or scores with a given
// mean) and the minutes; each -rules file is replayed on its own copy of the same data.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
)

type point [2]float64 // (minute, value)

// Stream is one synthetic series family: a counter pair (binomial) or a histogram (score).
type Stream struct {
	Kind    string            `json:"kind"`
	Good    map[string]string `json:"good"`
	Bad     map[string]string `json:"bad"`
	Base    string            `json:"base"`
	Labels  map[string]string `json:"labels"`
	Buckets []float64         `json:"buckets"`
	Rate    []point           `json:"rate"` // evaluations per hour, piecewise linear
	P       []point           `json:"p"`    // share of good outcomes (or mean score)
	SD      float64           `json:"sd"`   // the scores' spread (kind score)
	Seed    int64             `json:"seed"`
}

type Spec struct {
	Start     int64    `json:"start"`      // unix seconds of minute 0
	Minutes   int      `json:"minutes"`    // data from minute 0 to this
	EvalFrom  int      `json:"eval_from"`  // rules evaluated from this minute on
	SlowFrom  int      `json:"slow_from"`  // groups of an hour or more: from this minute on
	Streams   []Stream `json:"streams"`
	Watch     []string `json:"watch"`      // series printed every `watch_every` minutes
	WatchFrom int      `json:"watch_from"`
	WatchEvery int     `json:"watch_every"`
}

func at(points []point, minute float64) float64 {
	if len(points) == 0 {
		return 0
	}
	if minute <= points[0][0] {
		return points[0][1]
	}
	for i := 1; i < len(points); i++ {
		if minute < points[i][0] {
			a, b := points[i-1], points[i]
			if b[0] == a[0] {
				return b[1]
			}
			return a[1] + (b[1]-a[1])*(minute-a[0])/(b[0]-a[0])
		}
	}
	return points[len(points)-1][1]
}

func poisson(r *rand.Rand, lambda float64) int {
	if lambda > 60 {
		v := math.Round(lambda + math.Sqrt(lambda)*r.NormFloat64())
		if v < 0 {
			return 0
		}
		return int(v)
	}
	l, k, p := math.Exp(-lambda), 0, 1.0
	for {
		p *= r.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

func binomial(r *rand.Rand, n int, p float64) int {
	if n > 200 {
		mean, sd := float64(n)*p, math.Sqrt(float64(n)*p*(1-p))
		v := math.Round(mean + sd*r.NormFloat64())
		return int(math.Max(0, math.Min(float64(n), v)))
	}
	k := 0
	for i := 0; i < n; i++ {
		if r.Float64() < p {
			k++
		}
	}
	return k
}

type series struct {
	lset  labels.Labels
	value float64
	ref   storage.SeriesRef
}

// source holds the streams' counters and advances them a minute at a time.
type source struct {
	streams []Stream
	rngs    []*rand.Rand
	series  [][]*series // per stream: binomial (good, bad); score (count, sum, buckets...)
}

func lset(name string, m map[string]string, extra ...string) labels.Labels {
	b := labels.NewBuilder(nil)
	b.Set("__name__", name)
	for k, v := range m {
		if k != "__name__" {
			b.Set(k, v)
		}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		b.Set(extra[i], extra[i+1])
	}
	return b.Labels(nil)
}

func newSource(streams []Stream) *source {
	s := &source{streams: streams}
	for _, st := range streams {
		s.rngs = append(s.rngs, rand.New(rand.NewSource(st.Seed)))
		var out []*series
		switch st.Kind {
		case "binomial":
			out = append(out, &series{lset: lset(st.Good["__name__"], st.Good)},
				&series{lset: lset(st.Bad["__name__"], st.Bad)})
		case "score":
			out = append(out, &series{lset: lset(st.Base+"_count", st.Labels)},
				&series{lset: lset(st.Base+"_sum", st.Labels)})
			for _, b := range st.Buckets {
				out = append(out, &series{lset: lset(st.Base+"_bucket", st.Labels, "le", fmt.Sprint(b))})
			}
			out = append(out, &series{lset: lset(st.Base+"_bucket", st.Labels, "le", "+Inf")})
		default:
			panic("unknown stream kind " + st.Kind)
		}
		s.series = append(s.series, out)
	}
	return s
}

func (s *source) advance(minute int) {
	for i, st := range s.streams {
		r, out := s.rngs[i], s.series[i]
		n := poisson(r, at(st.Rate, float64(minute))/60)
		p := at(st.P, float64(minute))
		switch st.Kind {
		case "binomial":
			good := binomial(r, n, p)
			out[0].value += float64(good)
			out[1].value += float64(n - good)
		case "score":
			for j := 0; j < n; j++ {
				v := math.Max(0, math.Min(1, p+st.SD*r.NormFloat64()))
				v = math.Round(v*100) / 100
				out[0].value++
				out[1].value += v
				for k, b := range st.Buckets {
					if v <= b {
						out[2+k].value++
					}
				}
				out[2+len(st.Buckets)].value++
			}
		}
	}
}

func (s *source) append(app storage.Appender, ts int64) error {
	for _, out := range s.series {
		for _, se := range out {
			ref, err := app.Append(se.ref, se.lset, ts, se.value)
			if err != nil {
				return err
			}
			se.ref = ref
		}
	}
	return nil
}

type transition struct {
	Minute int               `json:"m"`
	Rules  string            `json:"rules"`
	Alert  string            `json:"alert"`
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

func replay(spec *Spec, ruleFile string, out *json.Encoder) error {
	dir, err := os.MkdirTemp("", "promreplay")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	opts := tsdb.DefaultOptions()
	opts.RetentionDuration = 0
	db, err := tsdb.Open(dir, log.NewNopLogger(), nil, opts, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	engine := promql.NewEngine(promql.EngineOpts{
		Logger: log.NewNopLogger(), MaxSamples: 500000000, Timeout: time.Hour,
		LookbackDelta: 5 * time.Minute, EnableAtModifier: true, EnableNegativeOffset: true,
		NoStepSubqueryIntervalFn: func(int64) int64 { return 60000 },
	})
	manager := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:  rules.EngineQueryFunc(engine, db),
		Appendable: db, Queryable: db,
		Context:    context.Background(),
		NotifyFunc: func(context.Context, string, ...*rules.Alert) {},
		Logger:     log.NewNopLogger(),
	})
	groupsMap, errs := manager.LoadGroups(time.Minute, labels.EmptyLabels(), "http://localhost", nil, ruleFile)
	if errs != nil {
		return fmt.Errorf("%v", errs)
	}
	var groups []*rules.Group
	for _, g := range groupsMap {
		groups = append(groups, g)
	}
	order := fileOrder(ruleFile)
	sort.Slice(groups, func(i, j int) bool { return order[groups[i].Name()] < order[groups[j].Name()] })
	for _, g := range groups {
		for _, r := range g.Rules() {
			if ar, ok := r.(*rules.AlertingRule); ok {
				ar.SetRestored(true)
			}
		}
	}
	var costs map[string]time.Duration
	if os.Getenv("PROMREPLAY_COSTS") != "" {
		costs = map[string]time.Duration{}
		defer func() {
			type kv struct {
				k string
				v time.Duration
			}
			var all []kv
			for k, v := range costs {
				all = append(all, kv{k, v})
			}
			sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v })
			for i := 0; i < len(all) && i < 30; i++ {
				fmt.Fprintf(os.Stderr, "cost %8.2fs %s\n", all[i].v.Seconds(), all[i].k)
			}
		}()
	}
	src := newSource(spec.Streams)
	firing := map[string]bool{}
	ctx := context.Background()
	for minute := 0; minute <= spec.Minutes; minute++ {
		src.advance(minute)
		ts := (spec.Start + int64(minute)*60) * 1000
		app := db.Appender(ctx)
		if err := src.append(app, ts); err != nil {
			return err
		}
		if err := app.Commit(); err != nil {
			return err
		}
		if minute < spec.EvalFrom && minute < spec.SlowFrom {
			continue
		}
		when := time.UnixMilli(ts).UTC()
		for _, g := range groups {
			if (ts/1000)%int64(g.Interval()/time.Second) != 0 {
				continue
			}
			if minute < spec.EvalFrom && g.Interval() < time.Hour {
				continue
			}
			g.Eval(ctx, when)
			for _, r := range g.Rules() {
				if costs != nil {
					costs[g.Name()+" "+r.Name()] += r.GetEvaluationDuration()
				}
				if r.LastError() != nil {
					return fmt.Errorf("minute %d: rule %s: %v", minute, r.Name(), r.LastError())
				}
			}
		}
		now := map[string]*rules.Alert{}
		names := map[string]string{}
		for _, g := range groups {
			for _, r := range g.Rules() {
				ar, ok := r.(*rules.AlertingRule)
				if !ok {
					continue
				}
				for _, a := range ar.ActiveAlerts() {
					if a.State == rules.StateFiring {
						key := ar.Name() + a.Labels.String()
						now[key] = a
						names[key] = ar.Name()
					}
				}
			}
		}
		for key, a := range now {
			if !firing[key] {
				firing[key] = true
				out.Encode(transition{minute, ruleFile, names[key], a.Labels.Map(), "firing"})
			}
		}
		for key := range firing {
			if _, ok := now[key]; !ok {
				delete(firing, key)
				name := strings.SplitN(key, "{", 2)[0]
				out.Encode(transition{minute, ruleFile, name, labelsOf(key, name), "resolved"})
			}
		}
		if spec.WatchEvery > 0 && minute >= spec.WatchFrom && minute%spec.WatchEvery == 0 {
			for _, expr := range spec.Watch {
				q, err := engine.NewInstantQuery(db, nil, expr, when)
				if err != nil {
					return err
				}
				res := q.Exec(ctx)
				if res.Err != nil {
					return res.Err
				}
				fmt.Fprintf(os.Stderr, "watch m=%d %s: %v\n", minute, expr, res.Value)
				q.Close()
			}
		}
	}
	return nil
}

func labelsOf(key, name string) map[string]string {
	lset, err := promqlParseLabels(strings.TrimPrefix(key, name))
	if err != nil {
		return map[string]string{"_key": key}
	}
	return lset
}

func main() {
	specPath := flag.String("spec", "", "the streams (JSON)")
	var files multi
	flag.Var(&files, "rules", "a rules file (repeat to replay several on the same data)")
	profile := flag.String("cpuprofile", "", "write a CPU profile here")
	flag.Parse()
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			fail(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	raw, err := os.ReadFile(*specPath)
	if err != nil {
		fail(err)
	}
	var spec Spec
	if err := json.Unmarshal(raw, &spec); err != nil {
		fail(err)
	}
	out := json.NewEncoder(os.Stdout)
	for _, file := range files {
		start := time.Now()
		if err := replay(&spec, file, out); err != nil {
			fail(err)
		}
		fmt.Fprintf(os.Stderr, "promreplay: %s replayed in %.0f s\n", file, time.Since(start).Seconds())
	}
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "promreplay:", err)
	os.Exit(1)
}
