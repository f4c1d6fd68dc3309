/* app/commands.h — the subcommands of the nibble CLI, one file each. */
#ifndef NB_APP_COMMANDS_H
#define NB_APP_COMMANDS_H

struct nb_command {
    const char *name;
    const char *help;
    int (*fn)(int argc, char **argv); /* argv[0] is the command name */
};

int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_probe(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_cache(int argc, char **argv);
int cmd_kvbudget(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_agent(int argc, char **argv);

#endif
