/* nibble run — placeholder until the model lands. */
#include <stdio.h>

#include "app/commands.h"

int cmd_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "nibble run: not built yet\n");
    return 1;
}
