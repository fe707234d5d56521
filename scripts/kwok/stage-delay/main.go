// Command kns-stage-delay evaluates kwok's own stage code (sigs.k8s.io/kwok
// pkg/utils/lifecycle, the code kwok's pod controller runs, on the stages for pods) on pods, to hold the e2e
// tests' kwok stages to what they model (tests/test_stage_vs_wait.py, docs/testing.md).
//
// Usage: kns-stage-delay STAGES.yaml < requests
//
// Each input line is a JSON object {"pod": <Pod>, "now": "<RFC 3339 time>"}. Each output
// line is a JSON object: {"stage": <name of the stage kwok picks, "" if none>, "at":
// <now plus the stage's delay, RFC 3339 with nanoseconds, "" if the stage has no delay>}.
// Built by scripts/cluster-build.sh inside a copy of the kwok module, so it runs exactly
// the pinned kwok's code.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"

	"sigs.k8s.io/kwok/pkg/apis/internalversion"
	"sigs.k8s.io/kwok/pkg/config"
	"sigs.k8s.io/kwok/pkg/utils/lifecycle"
)

type request struct {
	Pod corev1.Pod `json:"pod"`
	Now time.Time  `json:"now"`
}

type answer struct {
	Stage string `json:"stage"`
	At    string `json:"at"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kns-stage-delay STAGES.yaml < requests")
		os.Exit(2)
	}
	ctx := context.Background()
	objects, err := config.Load(ctx, os.Args[1])
	if err != nil {
		fail("load %s: %v", os.Args[1], err)
	}
	// kwok's pod controller plays the stages whose resourceRef is the Pod (its podRef).
	podRef := internalversion.StageResourceRef{APIGroup: "v1", Kind: "Pod"}
	var stages []*internalversion.Stage
	for _, stage := range config.FilterWithType[*internalversion.Stage](objects) {
		if stage.Spec.ResourceRef == podRef {
			stages = append(stages, stage)
		}
	}
	if len(stages) == 0 {
		fail("%s has no kwok Stage for pods", os.Args[1])
	}
	lc, err := lifecycle.NewLifecycle(stages)
	if err != nil {
		fail("stages: %v", err)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<26)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var req request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fail("request: %v", err)
		}
		pod := req.Pod
		event := &lifecycle.Event{Labels: pod.Labels, Annotations: pod.Annotations, Data: &pod}
		stage, err := lc.Match(ctx, event)
		if err != nil {
			fail("match: %v", err)
		}
		got := answer{}
		if stage != nil {
			got.Stage = stage.Name()
			delay, ok, err := stage.Delay(ctx, event, req.Now)
			if err != nil {
				fail("delay of stage %s: %v", stage.Name(), err)
			}
			if ok {
				got.At = req.Now.Add(delay).Format(time.RFC3339Nano)
			}
		}
		if err := out.Encode(got); err != nil {
			fail("write: %v", err)
		}
	}
	if err := in.Err(); err != nil {
		fail("read: %v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kns-stage-delay: "+format+"\n", args...)
	os.Exit(1)
}
