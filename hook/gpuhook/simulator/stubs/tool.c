/* Stub driver tool for simulated hosts. */
#include <stdio.h>
int main(int argc, char **argv) { (void)argc; printf("%s (gpuhook simulated)\n", argv[0]); return 0; }
