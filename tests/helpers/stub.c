/* Keeps the test-helper library non-empty when no helper sources exist. */
int nb_testhelpers_present(void) { return 1; }
