// Command minimal-host is a minimal Pulumi language host for Python programs. kns-platform's
// scripts/toolchain.sh builds it when the Go module proxy does not serve the upstream host.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	"github.com/pulumi/pulumi/sdk/v3/go/common/version"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"github.com/pulumi/pulumi/sdk/v3/python/toolchain"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// Exit code the exec script uses after it has shown the user an actionable error.
const userActionableExitCode = 32

type host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer
	engineAddress string
	execScript    string
}

// How long the Python processes this host runs get to end after SIGTERM when the engine
// stops the host, before they are killed: within the engine's own 5 s.
const childGrace = 3 * time.Second

// running holds the Python processes this host has started and not yet reaped, each with
// a channel closed when it has been.
var running = struct {
	sync.Mutex
	reaped map[*os.Process]chan struct{}
}{reaped: map[*os.Process]chan struct{}{}}

// runChild runs cmd to its end with SIGINT ignored: an ignored signal stays ignored across
// exec, so Python installs no KeyboardInterrupt handler and a stopped `up` prints no Python
// traceback. The host catches SIGINT itself (main), so the command runs under /bin/sh,
// which ignores it before it execs the command.
func runChild(cmd *exec.Cmd) error {
	cmd.Args = append([]string{"/bin/sh", "-c", `trap '' INT; exec "$0" "$@"`, cmd.Path}, cmd.Args[1:]...)
	cmd.Path = "/bin/sh"
	running.Lock()
	if err := cmd.Start(); err != nil {
		running.Unlock()
		return err
	}
	reaped := make(chan struct{})
	running.reaped[cmd.Process] = reaped
	running.Unlock()
	err := cmd.Wait()
	running.Lock()
	delete(running.reaped, cmd.Process)
	close(reaped)
	running.Unlock()
	return err
}

// endChildren asks every running Python process to end (SIGTERM: no traceback), waits up
// to grace for them, and kills what is left.
func endChildren(grace time.Duration) {
	running.Lock()
	waiting := map[*os.Process]chan struct{}{}
	for process, reaped := range running.reaped {
		_ = process.Signal(syscall.SIGTERM)
		waiting[process] = reaped
	}
	running.Unlock()
	expired, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	for process, reaped := range waiting {
		select {
		case <-reaped:
		case <-expired.Done():
			_ = process.Kill()
		}
	}
}

func main() {
	// The engine passes its address as the last positional argument; flags (tracing,
	// logging) may come before it and are ignored.
	engineAddress := ""
	for _, a := range os.Args[1:] {
		if !strings.HasPrefix(a, "-") {
			engineAddress = a
		}
	}
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cannot locate pulumi-language-python: %v\n", err)
		os.Exit(1)
	}
	// The engine stops a plugin with SIGINT to its process group, and kills it 5 s later if
	// it is still there. The host ends at once, ending the Python processes it runs first
	// (they ignore SIGINT themselves: see runChild). Ignoring SIGINT here, as this host did,
	// cost those 5 s twice per engine run (docs/operations.md, "The Python language host").
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, os.Interrupt)
	go func() {
		<-interrupted
		endChildren(childGrace)
		os.Exit(0)
	}()
	execScript := filepath.Join(filepath.Dir(self), "pulumi-language-python-exec")
	if _, err := os.Stat(execScript); err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-python-exec not found next to the language host: %v\n", err)
		os.Exit(1)
	}
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, &host{engineAddress: engineAddress, execScript: execScript})
			return nil
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "could not start language host RPC server: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("%d\n", handle.Port)
	if err := <-handle.Done; err != nil {
		fmt.Fprintf(os.Stderr, "language host RPC stopped serving: %v\n", err)
		os.Exit(1)
	}
}

func resolveToolchain(info *pulumirpc.ProgramInfo) (toolchain.Toolchain, error) {
	opts := toolchain.PythonOptions{
		Root:       info.GetRootDirectory(),
		ProgramDir: info.GetProgramDirectory(),
	}
	if opts.ProgramDir == "" {
		opts.ProgramDir = opts.Root
	}
	if opts.Root == "" {
		opts.Root = opts.ProgramDir
	}
	var options map[string]any
	if s := info.GetOptions(); s != nil {
		options = s.AsMap()
	}
	if v, ok := options["virtualenv"].(string); ok {
		opts.Virtualenv = v
	}
	switch tc, _ := options["toolchain"].(string); strings.ToLower(tc) {
	case "", "auto":
		opts.Toolchain = toolchain.Auto
	case "pip":
		opts.Toolchain = toolchain.Pip
	case "poetry":
		opts.Toolchain = toolchain.Poetry
	case "uv":
		opts.Toolchain = toolchain.Uv
	default:
		return nil, fmt.Errorf("unsupported python toolchain %q", tc)
	}
	return toolchain.ResolveToolchain(opts)
}

func (h *host) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version.Version}, nil
}

func (h *host) GetRequiredPlugins(context.Context, *pulumirpc.GetRequiredPluginsRequest,
) (*pulumirpc.GetRequiredPluginsResponse, error) {
	return &pulumirpc.GetRequiredPluginsResponse{}, nil
}

func (h *host) GetRequiredPackages(context.Context, *pulumirpc.GetRequiredPackagesRequest,
) (*pulumirpc.GetRequiredPackagesResponse, error) {
	return &pulumirpc.GetRequiredPackagesResponse{}, nil
}

// About answers what the CLI records with every update (the runtime's executable and
// version): one Python process that prints both. The toolchain's own About also runs
// `python -m pip --version`, about a CPU second per preview or update, for a pip version
// the CLI never records (docs/benchmarks.md, "The language host's About").
func (h *host) About(ctx context.Context, req *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	tc, err := resolveToolchain(req.GetInfo())
	if err != nil {
		return nil, err
	}
	cmd, err := tc.Command(ctx, "-c", "import sys; print(sys.executable); print(sys.version.split()[0])")
	if err != nil {
		return nil, err
	}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("could not ask Python for its executable and version: %w", err)
	}
	executable, version, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return &pulumirpc.AboutResponse{
		Executable: strings.TrimSpace(executable),
		Version:    strings.TrimSpace(version),
		Metadata:   map[string]string{"host": "kns-minimal"},
	}, nil
}

func (h *host) GetProgramDependencies(ctx context.Context, req *pulumirpc.GetProgramDependenciesRequest,
) (*pulumirpc.GetProgramDependenciesResponse, error) {
	tc, err := resolveToolchain(req.GetInfo())
	if err != nil {
		return nil, err
	}
	pkgs, err := tc.ListPackages(ctx, req.GetTransitiveDependencies())
	if err != nil {
		return nil, err
	}
	resp := &pulumirpc.GetProgramDependenciesResponse{}
	for _, p := range pkgs {
		resp.Dependencies = append(resp.Dependencies, &pulumirpc.DependencyInfo{Name: p.Name, Version: p.Version})
	}
	return resp, nil
}

// RunPlugin runs a plugin written in Python (for this host, a policy pack): the engine
// passes the pack's directory as the program directory, and Python runs its __main__.py.
// Output is streamed back to the engine, which reads the plugin's port from stdout.
func (h *host) RunPlugin(req *pulumirpc.RunPluginRequest, server pulumirpc.LanguageRuntime_RunPluginServer) error {
	info := req.GetInfo()
	if info == nil {
		return errors.New("RunPlugin: the engine sent no program info")
	}
	tc, err := resolveToolchain(info)
	if err != nil {
		return err
	}
	if err := tc.ValidateVenv(server.Context()); err != nil {
		return err
	}
	dir := info.GetProgramDirectory()
	if entry := info.GetEntryPoint(); entry != "" && entry != "." {
		dir = filepath.Join(dir, entry)
	}
	args := append([]string{"-u", dir}, req.GetArgs()...)
	cmd, err := tc.Command(server.Context(), args...)
	if err != nil {
		return err
	}
	// The engine's environment for the plugin, then the virtualenv activation on top.
	env := append([]string{}, req.GetEnv()...)
	if len(env) == 0 {
		env = os.Environ()
	}
	if cmd.Env != nil {
		for _, kv := range cmd.Env {
			key := kv[:strings.IndexByte(kv+"=", '=')]
			if key == "PATH" || key == "VIRTUAL_ENV" || key == "PYTHONHOME" {
				env = append(env, kv)
			}
		}
	}
	cmd.Env = append(env, "PYTHONUNBUFFERED=true")
	cmd.Dir = req.GetPwd()
	closer, stdout, stderr, err := rpcutil.MakeRunPluginStreams(server, false)
	if err != nil {
		return err
	}
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	runErr := runChild(cmd)
	if err := closer.Close(); err != nil {
		return err
	}
	code := 0
	if runErr != nil {
		var exitErr *exec.ExitError
		if !errors.As(runErr, &exitErr) {
			return fmt.Errorf("could not run plugin %s: %w", dir, runErr)
		}
		code = exitErr.ExitCode()
		if status, ok := exitErr.Sys().(syscall.WaitStatus); ok && status.Signaled() {
			code = 128 + int(status.Signal())
		}
	}
	return server.Send(&pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Exitcode{Exitcode: int32(code)}})
}

func (h *host) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	info := req.GetInfo()
	if info == nil {
		info = &pulumirpc.ProgramInfo{RootDirectory: req.GetPwd(), ProgramDirectory: req.GetPwd(),
			EntryPoint: req.GetProgram(), Options: &structpb.Struct{}}
	}
	tc, err := resolveToolchain(info)
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	if err := tc.ValidateVenv(ctx); err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}

	program := info.GetEntryPoint()
	if program == "" {
		program = "."
	}
	pwd := req.GetPwd()
	if pwd == "" {
		pwd = info.GetProgramDirectory()
	}
	args := []string{"-u", h.execScript,
		"--monitor", req.GetMonitorAddress(),
		"--engine", h.engineAddress,
		"--project", req.GetProject(),
		"--stack", req.GetStack(),
		"--pwd", pwd,
		"--dry_run", fmt.Sprint(req.GetDryRun()),
		"--parallel", fmt.Sprint(req.GetParallel()),
	}
	if root := info.GetRootDirectory(); root != "" {
		args = append(args, "--root_directory", root)
	}
	if org := req.GetOrganization(); org != "" {
		args = append(args, "--organization", org)
	}
	args = append(args, program)
	args = append(args, req.GetArgs()...)

	cmd, err := tc.Command(ctx, args...)
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	configMap := req.GetConfig()
	if configMap == nil {
		configMap = map[string]string{}
	}
	config, err := json.Marshal(configMap)
	if err != nil {
		return nil, err
	}
	secretKeys := req.GetConfigSecretKeys()
	if secretKeys == nil {
		secretKeys = []string{}
	}
	secrets, err := json.Marshal(secretKeys)
	if err != nil {
		return nil, err
	}
	cmd.Env = append(env, "PULUMI_CONFIG="+string(config), "PULUMI_CONFIG_SECRET_KEYS="+string(secrets),
		"PYTHONUNBUFFERED=true")
	cmd.Dir = pwd
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr

	if err := runChild(cmd); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			if exitErr.ExitCode() == userActionableExitCode {
				return &pulumirpc.RunResponse{Bail: true}, nil
			}
			return &pulumirpc.RunResponse{Error: fmt.Sprintf("Program exited with non-zero exit code: %d",
				exitErr.ExitCode())}, nil
		}
		return &pulumirpc.RunResponse{Error: fmt.Sprintf(
			"Problem executing program (could not run language executor): %v", err)}, nil
	}
	return &pulumirpc.RunResponse{}, nil
}
