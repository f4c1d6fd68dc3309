/* Fuzz target: nb_agent_tasks_parse on arbitrary bytes; a task file that parses is then
 * played by every scripted policy (its first 4 tasks), and the input's bytes are also
 * given to an episode as a model's reply. */
#include <stdint.h>
#include <string.h>

#include "nibble.h"
#include "nibble_eval.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct nb_agent_tasks *t = NULL;
    if (nb_agent_tasks_parse(&t, (const char *)data, size, "fuzz") != NB_OK) return 0;
    char reply[256];
    for (int k = 0; k < nb_agent_tasks_count(t) && k < 4; k++) {
        for (int p = 0; p < NB_AGENT_N_POLICIES; p++) {
            struct nb_agent_episode *e = NULL;
            if (nb_agent_episode_init(&e, t, k, (uint64_t)p) != NB_OK) continue;
            for (int i = 0; i < 200 && nb_agent_episode_outcome(e) == NB_AGENT_RUNNING; i++) {
                (void)nb_agent_episode_screen(e, i & 1);
                if (nb_agent_policy_reply(e, p, reply, sizeof reply) != NB_OK) break;
                (void)nb_agent_episode_step(e, reply, strlen(reply));
            }
            nb_agent_episode_free(e);
        }
        struct nb_agent_episode *e = NULL;
        if (nb_agent_episode_init(&e, t, k, 1) == NB_OK) {
            (void)nb_agent_episode_step(e, (const char *)data, size);
            nb_agent_episode_free(e);
        }
    }
    nb_agent_tasks_free(t);
    return 0;
}
