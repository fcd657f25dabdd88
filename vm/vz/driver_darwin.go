//go:build darwin

package vz

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"

	"github.com/Code-Hex/vz/v3"

	"github.com/osaurus/osaurus-sandbox/vm"
	"github.com/osaurus/osaurus-sandbox/vm/vz/core"
)

// Driver starts VMs on Apple's Virtualization framework.
type Driver struct{}

var _ vm.Driver = (*Driver)(nil)

// New returns the vz driver.
func New() *Driver { return &Driver{} }

// Name implements vm.Driver.
func (*Driver) Name() string { return "vz" }

// Start implements vm.Driver: it configures the VM from spec, starts it
// and returns once the framework reports it started. The framework's own
// dispatch queue serialises the calls; vz/v3 hops onto it internally, so
// any goroutine may call.
func (*Driver) Start(ctx context.Context, spec vm.Spec) (vm.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	plan, err := core.NewPlan(spec, limits(), runtime.GOARCH)
	if err != nil {
		return nil, err
	}
	config, err := configure(plan)
	if err != nil {
		return nil, err
	}
	if ok, err := config.Validate(); err != nil || !ok {
		return nil, invalidConfig(err)
	}
	machine, err := vz.NewVirtualMachine(config)
	if err != nil {
		return nil, needs(err, "creating a VM", 11)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := machine.Start(); err != nil {
		return nil, fmt.Errorf("vz: start VM: %w", err)
	}
	devs := machine.SocketDevices()
	if len(devs) == 0 {
		machine.Stop()
		return nil, errors.New("vz: the started VM has no vsock device")
	}
	vsock := devs[0]
	p := core.NewProcess(core.Hooks{
		Connect: func() (net.Conn, error) {
			c, err := vsock.Connect(core.AgentPort)
			if err != nil {
				return nil, err
			}
			return c, nil
		},
		RequestStop: func() error {
			ok, err := machine.RequestStop()
			if err == nil && !ok {
				err = errors.New("the framework refused the request")
			}
			return err
		},
		Stop: func() error {
			if err := machine.Stop(); err != nil {
				return needs(err, "a hard stop", 12)
			}
			return nil
		},
		Pause:  machine.Pause,
		Resume: machine.Resume,
	}, plan.ConsoleLog)
	go func() {
		for s := range machine.StateChangedNotify() {
			if p.Observe(state(s)) {
				return
			}
		}
	}()
	return p, nil
}

func limits() core.Limits {
	return core.Limits{
		MinCPUs:   vz.VirtualMachineConfigurationMinimumAllowedCPUCount(),
		MaxCPUs:   vz.VirtualMachineConfigurationMaximumAllowedCPUCount(),
		MinMemory: vz.VirtualMachineConfigurationMinimumAllowedMemorySize(),
		MaxMemory: vz.VirtualMachineConfigurationMaximumAllowedMemorySize(),
	}
}

func state(s vz.VirtualMachineState) core.State {
	switch s {
	case vz.VirtualMachineStateStarting:
		return core.StateStarting
	case vz.VirtualMachineStateRunning:
		return core.StateRunning
	case vz.VirtualMachineStateStopping:
		return core.StateStopping
	case vz.VirtualMachineStateStopped:
		return core.StateStopped
	case vz.VirtualMachineStateError:
		return core.StateError
	}
	return core.StateOther
}

// needs turns the framework's "too old" errors into vm.ErrUnsupported
// saying which macOS the feature needs; other errors are wrapped as is.
func needs(err error, feature string, macOS int) error {
	switch {
	case errors.Is(err, vz.ErrUnsupportedOSVersion):
		return fmt.Errorf("%w: vz: %s needs macOS %d or later: %w", vm.ErrUnsupported, feature, macOS, err)
	case errors.Is(err, vz.ErrBuildTargetOSVersion):
		return fmt.Errorf("%w: vz: %s needs macOS %d, but this binary was built with an older macOS SDK; rebuild with current Xcode command-line tools: %w",
			vm.ErrUnsupported, feature, macOS, err)
	}
	return fmt.Errorf("vz: %s: %w", feature, err)
}

// invalidConfig explains a configuration the framework rejected. The
// usual cause on a developer's Mac is a binary signed without the
// virtualization entitlement.
func invalidConfig(err error) error {
	if err == nil {
		return errors.New("vz: the framework rejected the VM configuration")
	}
	if strings.Contains(err.Error(), "com.apple.security.virtualization") {
		return fmt.Errorf("%w: vz: the binary lacks the com.apple.security.virtualization entitlement; sign it with entitlements.plist (make run does): %w",
			vm.ErrUnsupported, err)
	}
	return fmt.Errorf("vz: invalid VM configuration: %w", err)
}
