// Human-readable output of the CLI: results, plan reports, sweeps.
#ifndef SLACKSWAP_CLI_PRINT_H_
#define SLACKSWAP_CLI_PRINT_H_

#include <ostream>
#include <string>
#include <vector>

#include "slackswap/v1/report.pb.h"
#include "slackswap/v1/simulation.pb.h"

namespace slackswap {

void PrintSimulation(const std::string& title, const v1::SimulationResult& r,
                     std::ostream& out);
// A node simulation's step, then a table of its ranks (step, share of the
// ideal, stalls of every kind, activation peak) and one of its shared links
// (GB each way, utilization of the step's capacity), then the sockets'
// pinned peaks.
void PrintNodeSimulation(const v1::NodeSimulation& n, std::ostream& out);
void PrintPlanReport(const v1::PlanReport& report, std::ostream& out);
void PrintSweepTable(const v1::SweepReport& report,
                     const std::vector<std::string>& policies,
                     std::ostream& out);
void PrintSweepCsv(const v1::SweepReport& report, std::ostream& out);

}  // namespace slackswap

#endif  // SLACKSWAP_CLI_PRINT_H_
