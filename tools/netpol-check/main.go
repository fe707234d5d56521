// netpol-check answers, for NetworkPolicies and flows read as JSON on stdin, whether each
// flow is allowed: the question a cluster's network plugin answers, asked of cyclonus's
// NetworkPolicy matcher (github.com/mattfenwick/cyclonus, pkg/matcher), which runs without
// a cluster. The program's own policies are checked with it (tests/test_network_matrix.py);
// it is not the program's code.
//
// Input:  {"policies": [NetworkPolicy...], "flows": [{"from": Peer, "to": Peer,
//          "port": 8080, "protocol": "TCP"}...]}
// Peer:   {"namespace": "kns-a", "namespaceLabels": {...}, "podLabels": {...}, "ip": "10.244.0.5"}
//         a peer without namespace is outside the cluster (the API server, the internet).
// Output: {"flows": [{"allowed": bool, "ingress": bool, "egress": bool}...]}
// A policy the matcher cannot read (it panics on some invalid ones) is an error: exit 2.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

type peer struct {
	Namespace       string            `json:"namespace"`
	NamespaceLabels map[string]string `json:"namespaceLabels"`
	PodLabels       map[string]string `json:"podLabels"`
	IP              string            `json:"ip"`
}

type flow struct {
	From     peer   `json:"from"`
	To       peer   `json:"to"`
	Port     int    `json:"port"`
	Protocol string `json:"protocol"`
}

type input struct {
	Policies []*networkingv1.NetworkPolicy `json:"policies"`
	Flows    []flow                        `json:"flows"`
}

type answer struct {
	Allowed bool `json:"allowed"`
	Ingress bool `json:"ingress"`
	Egress  bool `json:"egress"`
}

func trafficPeer(p peer) *matcher.TrafficPeer {
	if p.Namespace == "" {
		return &matcher.TrafficPeer{IP: p.IP}
	}
	return &matcher.TrafficPeer{IP: p.IP, Internal: &matcher.InternalPeer{
		Namespace: p.Namespace, NamespaceLabels: p.NamespaceLabels, PodLabels: p.PodLabels}}
}

func run() (out []answer, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the matcher refused the policies: %v", r)
		}
	}()
	var in input
	decoder := json.NewDecoder(os.Stdin)
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&in); err != nil {
		return nil, fmt.Errorf("reading the input: %w", err)
	}
	policy := matcher.BuildNetworkPolicies(false, in.Policies)
	for _, f := range in.Flows {
		result := policy.IsTrafficAllowed(&matcher.Traffic{
			Source: trafficPeer(f.From), Destination: trafficPeer(f.To),
			ResolvedPort: f.Port, Protocol: v1.Protocol(f.Protocol)})
		out = append(out, answer{Allowed: result.IsAllowed(), Ingress: result.Ingress.IsAllowed(),
			Egress: result.Egress.IsAllowed()})
	}
	return out, nil
}

func main() {
	answers, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "netpol-check:", err)
		os.Exit(2)
	}
	if answers == nil {
		answers = []answer{}
	}
	if err := json.NewEncoder(os.Stdout).Encode(map[string][]answer{"flows": answers}); err != nil {
		fmt.Fprintln(os.Stderr, "netpol-check:", err)
		os.Exit(2)
	}
}
