// Command cron-oracle answers, for each JSON line on stdin, what Kubernetes does with a
// CronJob schedule: whether the API server accepts it (robfig/cron/v3 ParseStandard plus
// the "TZ" refusal of validateScheduleFormat) and, when it does, the next fire times the
// CronJob controller computes (the schedule parsed as "TZ=<zone> <schedule>", as the
// controller's formatSchedule does for spec.timeZone, and Next applied repeatedly).
//
// Input line:  {"expr": "0 2 * * *", "zone": "Europe/London", "start": "2026-03-28T00:00:00Z", "count": 5}
// Output line: {"ok": true, "never": false, "next": ["2026-03-28T02:00:00+00:00", ...]}
//
//	or {"ok": false, "error": "..."}
//
// It is the reference that config/kcron.py is tested against (tests/test_kcron.py).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

type request struct {
	Expr  string `json:"expr"`
	Zone  string `json:"zone"`
	Start string `json:"start"`
	Count int    `json:"count"`
}

// accepted is the answer for a schedule Kubernetes accepts.
type accepted struct {
	OK    bool     `json:"ok"`
	Never bool     `json:"never"`
	Next  []string `json:"next"`
}

// refused is the answer for a schedule Kubernetes refuses (or a bad request).
type refused struct {
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

// layout is RFC 3339 with a numeric offset always ("+00:00", never "Z").
const layout = "2006-01-02T15:04:05-07:00"

// parse calls cron.ParseStandard, turning a panic (robfig panics on "TZ=x" with no
// space after the zone) into an error, as the API server's panic recovery refuses it.
func parse(spec string) (s cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("panic: %v", r)
		}
	}()
	return cron.ParseStandard(spec)
}

// validate is k8s.io/kubernetes pkg/apis/batch/validation validateScheduleFormat for a
// new CronJob (allowTZInSchedule false), plus the Required check on an empty schedule.
func validate(schedule string) []string {
	if len(schedule) == 0 {
		return []string{"Required value"}
	}
	var errs []string
	if _, err := parse(schedule); err != nil {
		errs = append(errs, err.Error())
	}
	if strings.Contains(schedule, "TZ") {
		errs = append(errs, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead")
	}
	return errs
}

func answer(req request) (resp any) {
	defer func() {
		if r := recover(); r != nil {
			resp = refused{Error: fmt.Sprintf("panic: %v", r)}
		}
	}()
	if errs := validate(req.Expr); len(errs) > 0 {
		return refused{Error: strings.Join(errs, "; ")}
	}
	loc, err := time.LoadLocation(req.Zone)
	if err != nil {
		return refused{Error: "zone: " + err.Error()}
	}
	start, err := time.Parse(time.RFC3339Nano, req.Start)
	if err != nil {
		return refused{Error: "start: " + err.Error()}
	}
	sched, err := parse(fmt.Sprintf("TZ=%s %s", req.Zone, req.Expr))
	if err != nil {
		return refused{Error: "with zone: " + err.Error()}
	}
	never := false
	next := []string{}
	t := start.In(loc)
	for i := 0; i < req.Count; i++ {
		t = sched.Next(t)
		if t.IsZero() {
			never = i == 0
			break
		}
		next = append(next, t.In(loc).Format(layout))
	}
	return accepted{OK: true, Never: never, Next: next}
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	for in.Scan() {
		line := strings.TrimSpace(in.Text())
		if line == "" {
			continue
		}
		var req request
		var resp any
		if err := json.Unmarshal([]byte(line), &req); err != nil {
			resp = refused{Error: "request: " + err.Error()}
		} else {
			resp = answer(req)
		}
		// One line out per line in, flushed at once: a caller may talk to one process.
		if err := enc.Encode(resp); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := out.Flush(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
