/* Stub driver library for simulated hosts: a real ELF object with the right SONAME. */
const char *gpuhook_stub_name(void) { return STUB_NAME; }
