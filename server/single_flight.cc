#include "server/single_flight.h"

#include <utility>

namespace slackswap {

bool SingleFlight::Join(const std::string& key, Waiter waiter) {
  MutexLock lock(&mu_);
  std::vector<Waiter>& waiters = flights_[key];
  waiters.push_back(std::move(waiter));
  if (waiters.size() > 1) ++followers_;
  return waiters.size() == 1;
}

bool SingleFlight::AllGone(const std::string& key) const {
  MutexLock lock(&mu_);
  auto it = flights_.find(key);
  if (it == flights_.end()) return true;
  for (const Waiter& w : it->second) {
    if (!w.gone()) return false;
  }
  return true;
}

void SingleFlight::Finish(const std::string& key, const absl::Status& status,
                          const std::string& bytes,
                          const std::string& follower_bytes) {
  std::vector<Waiter> waiters;
  {
    MutexLock lock(&mu_);
    auto it = flights_.find(key);
    if (it == flights_.end()) return;
    waiters = std::move(it->second);
    flights_.erase(it);
  }
  for (size_t i = 0; i < waiters.size(); ++i) {
    waiters[i].deliver(status, i == 0 ? bytes : follower_bytes);
  }
}

int64_t SingleFlight::followers() const {
  MutexLock lock(&mu_);
  return followers_;
}

}  // namespace slackswap
