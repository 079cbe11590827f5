package sysctl

import "path/filepath"

// ModuleParam reads and writes one integer kernel module parameter, such as
// nf_conntrack's hashsize. Module parameters are host-wide (not per network
// namespace), which is why they have their own boundary.
type ModuleParam interface {
	Get() (int, error)
	Set(value int) error
}

// SysModuleParam implements ModuleParam with /sys/module/<Module>/parameters/<Name>.
type SysModuleParam struct {
	// Root defaults to "/sys/module".
	Root   string
	Module string
	Name   string
}

// ConntrackHashsize is the nf_conntrack "hashsize" module parameter.
func ConntrackHashsize() *SysModuleParam {
	return &SysModuleParam{Module: "nf_conntrack", Name: "hashsize"}
}

var _ ModuleParam = (*SysModuleParam)(nil)

func (m *SysModuleParam) path() string {
	root := m.Root
	if root == "" {
		root = "/sys/module"
	}
	return filepath.Join(root, m.Module, "parameters", m.Name)
}

// Get reads the parameter.
func (m *SysModuleParam) Get() (int, error) { return readIntFile(m.path()) }

// Set writes the parameter.
func (m *SysModuleParam) Set(value int) error { return writeIntFile(m.path(), value) }
